"""YAML front matter: a Markdown file that starts with `---`, YAML, `---`, then its body (AGENT.md, SKILL.md,
runbooks). Errors name the file and the line."""

from __future__ import annotations

from typing import Any, cast

import yaml

from bot.engine.errors import ProfileError

__all__ = ["FRONT_FIRST_LINE", "SAFE_LOADER", "line_of", "load_yaml", "parse_yaml", "split_front_matter"]

FRONT_FIRST_LINE = 2  # the front matter starts on the line after the opening '---'


def split_front_matter(text: str, path: str) -> tuple[str, str, int]:
    """Return (front matter, body, line number where the body starts)."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise ProfileError(path, "must start with a '---' line opening the YAML front matter", 1)
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :]).strip(), i + 2
    raise ProfileError(path, "the YAML front matter is not closed with a '---' line", 1)


# libyaml's parser where PyYAML was built with it (several times faster: profiles are read at every start,
# `agents` command and eval scenario); the same safe constructor either way
SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """`yaml.safe_load`, through the fast loader."""
    return yaml.load(text, Loader=SAFE_LOADER)  # noqa: S506 - a safe loader


def parse_yaml(front: str, path: str, first_line: int) -> tuple[dict[str, Any], yaml.Node | None]:
    try:
        loader = SAFE_LOADER(front)
        try:  # parsed once: the node tree (line numbers for errors) and the data built from it
            node = loader.get_single_node()
            data: Any = loader.construct_document(node) if node is not None else None  # pyright: ignore[reportUnknownMemberType]
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + first_line if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ProfileError(path, f"invalid YAML: {problem}", line) from None
    if data is None:
        return {}, node
    if not isinstance(data, dict):
        raise ProfileError(path, "the front matter must be a YAML mapping (key: value lines)", first_line)
    return cast(dict[str, Any], data), node


def line_of(node: yaml.Node | None, loc: tuple[Any, ...], first_line: int) -> int | None:
    """Follow a pydantic error location through the YAML node tree to a line number."""
    line: int | None = None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            found = None
            for knode, vnode in cast(list[tuple[yaml.Node, yaml.Node]], node.value):
                if knode.value == str(key):
                    line, found = knode.start_mark.line + first_line, vnode
                    break
            node = found
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = cast(list[yaml.Node], node.value)[key]
            line = node.start_mark.line + first_line
        else:
            break
    return line
