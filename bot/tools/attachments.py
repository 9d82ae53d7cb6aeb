"""`read_attachment`: read further in a text file attached to this turn's message (by line offset and count,
or the lines matching an RE2 pattern). Scoped to the turn: `RunContext.files`, never the disk or the net."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bot.engine.context import READ_TOOL
from bot.engine.run import ToolContext, require, tool
from bot.tools.patterns import compile_pattern


@tool(
    READ_TOOL,
    "Read more of a text file attached to the user's message (a log, a snippet), when the message showed only "
    "its head and tail: lines from `offset` (1 = the first line), or the lines matching `pattern` (a regular "
    "expression). Only files attached to this message can be read.",
)
async def read_attachment(
    ctx: ToolContext[Any],
    name: str,
    offset: int = Field(default=1, ge=1),
    count: int = Field(default=200, ge=1, le=2000),
    pattern: str | None = None,
    ignore_case: bool = False,
) -> str:
    files = ctx.run.files
    require(files is not None and bool(files), "No text file is attached to this message.")
    assert files is not None
    found = files.get(name)
    require(found is not None, f"No attached file is named {name!r}; attached: "
                               + ", ".join(repr(n) for n in files.texts))
    assert found is not None
    lines = found.lines
    if pattern is None:
        part = lines[offset - 1: offset - 1 + count]
        if not part:
            return f"{found.name} has {len(lines):,} lines; nothing from line {offset:,}."
        last = offset + len(part) - 1
        head = f"{found.name}, lines {offset:,}-{last:,} of {len(lines):,}:"
        return "\n".join([head, *(f"{offset + i}: {line}" for i, line in enumerate(part))])
    compiled = compile_pattern(pattern, ignore_case)
    hits = [(i, line) for i, line in enumerate(lines, 1) if i >= offset and compiled.search_line(line)]
    if not hits:
        return f"No line of {found.name} from line {offset:,} matches {pattern!r}."
    shown = hits[:count]
    head = f"{len(hits):,} lines of {found.name} match {pattern!r}" + (
        f"; the first {len(shown)} are shown" if len(hits) > len(shown) else "") + ":"
    return "\n".join([head, *(f"{i}: {line}" for i, line in shown)])
