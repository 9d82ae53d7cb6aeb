from __future__ import annotations

import asyncio
import re

from pydantic import Field

from bot.engine.tooling import ToolContext, require, tool
from bot.tools.logfiles import LogToolSettings, Match, compile_pattern, render, tail_logs
from bot.tools.sandbox import resolve_allowed


def matcher(contains: str | None, regex: bool) -> Match:
    if not contains:
        return lambda _line: True
    if regex:
        pattern: re.Pattern[str] = compile_pattern(contains)
        return lambda line: pattern.search(line) is not None
    return lambda line: contains in line


@tool(
    "tail_log",
    "Show the last lines of a log file (newest at the bottom), optionally only lines containing some text. Use "
    "it FIRST when asked what is happening now or recently (errors, 502s, crashes). It reads big files from "
    "the end without loading them and continues into rotated files (x.log.1, x.log.2.gz) when the current "
    "one is short. `contains` is plain text unless `regex` is true.",
    settings=LogToolSettings,
    timeout=60.0,
)
async def tail_log(
    ctx: ToolContext,
    path: str,
    lines: int = Field(default=100, ge=1, le=20_000),
    contains: str | None = None,
    regex: bool = False,
) -> str:
    settings = ctx.settings
    assert isinstance(settings, LogToolSettings)
    real = resolve_allowed(path, settings.roots)
    require(lines <= settings.max_lines, f"lines may be at most {settings.max_lines} for this agent")
    match = matcher(contains, regex)
    parts = await asyncio.to_thread(tail_logs, real, settings.roots, lines, match, settings.limits(),
                                    settings.rotated)
    what = f"lines containing {contains!r}" if contains else "lines"
    return render(parts, settings.max_output_chars, f"No {what} in {real}.")
