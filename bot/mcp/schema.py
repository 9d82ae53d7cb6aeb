"""Checks an MCP tool's input schema against what the model API (OpenAI function calling) accepts, and
validates arguments against it. A schema the API would reject would fail every turn of the agent with a
400, so it is refused when the server is connected, with the reason."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.exceptions import ValidationError as SchemaValidationError

_TOP_LEVEL_FORBIDDEN = ("anyOf", "oneOf", "allOf", "enum", "not")
# An input schema is sent with every model request of the agent; a few KB is usual, the largest real ones
# are tens of KB. Past this it is refused before anything walks it (a 6 MB schema took over a minute).
MAX_SCHEMA_CHARS = 100_000


def schema_problem(schema: Any) -> str | None:
    """None when the model API takes this as function parameters, else one sentence on why not."""
    if not isinstance(schema, dict):
        return "the input schema is not a JSON object"
    schema = cast(dict[str, Any], schema)
    size = len(json.dumps(schema, ensure_ascii=False, default=str))
    if size > MAX_SCHEMA_CHARS:
        return (f"the input schema is {size:,} characters of JSON, more than the {MAX_SCHEMA_CHARS:,} a tool "
                "may send to the model with every request")
    if schema.get("type") != "object":
        return f"the input schema must have type \"object\" at the top level (it has {schema.get('type')!r})"
    for key in _TOP_LEVEL_FORBIDDEN:
        if key in schema:
            return f"the input schema has {key!r} at the top level, which the model API rejects"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"the input schema is not valid JSON Schema ({exc.message})"
    for path, node in _nodes(schema, "parameters"):
        if _is_array(node) and "items" not in node and "prefixItems" not in node:
            return f"the array at {path} has no \"items\" schema, which the model API rejects"
    return None


def _is_array(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    return kind == "array" or (isinstance(kind, list) and "array" in kind)


def _nodes(node: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every sub-schema, with a readable path (parameters.properties.hosts)."""
    if isinstance(node, list):
        for i, item in enumerate(cast(list[Any], node)):
            yield from _nodes(item, f"{path}[{i}]")
        return
    if not isinstance(node, dict):
        return
    node = cast(dict[str, Any], node)
    yield path, node
    for key, value in node.items():
        if key in ("enum", "const", "default", "examples", "required"):
            continue  # values, not schemas
        if key in ("properties", "$defs", "definitions", "patternProperties"):
            for name, sub in cast(dict[str, Any], value).items() if isinstance(value, dict) else ():
                yield from _nodes(sub, f"{path}.{key}.{name}")
        elif isinstance(value, dict | list):
            yield from _nodes(value, f"{path}.{key}")


def argument_problem(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """The first way `arguments` break the schema, as the model should read it; None when they fit."""
    validator = Draft202012Validator(schema)
    # types-jsonschema's deprecated second overload of iter_errors leaves `instance` untyped: a stub's gap
    found: Iterator[SchemaValidationError] = validator.iter_errors(arguments)  # pyright: ignore[reportUnknownMemberType]
    errors = sorted(found, key=lambda e: list(e.path))
    if not errors:
        return None
    first: SchemaValidationError = errors[0]
    where = ".".join(str(p) for p in first.path) or "arguments"
    return f"{where}: {first.message}"
