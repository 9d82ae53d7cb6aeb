from __future__ import annotations

from pydantic import Field

from bot.engine.run import ToolContext, require, tool
from bot.tools.logfiles import LogToolSettings, line_filter, render, scan_in_thread, tail_logs
from bot.tools.patterns import compile_pattern
from bot.tools.sandbox import resolve_allowed


@tool(
    "tail_log",
    "Show the last lines of a log file (newest at the bottom), optionally only lines containing some text. "
    "Use it FIRST when asked what is happening now or recently (errors, 502s, crashes). It reads big files "
    "from the end without loading them and continues into rotated files (x.log.1, x.log.2.gz) when the "
    "current one is short. `contains` is plain text unless `regex` is true.",
    settings=LogToolSettings,
    timeout=60.0,
)
async def tail_log(
    ctx: ToolContext[LogToolSettings],
    path: str,
    lines: int = Field(default=100, ge=1, le=20_000),
    contains: str | None = None,
    regex: bool = False,
) -> str:
    settings = ctx.settings
    real = resolve_allowed(path, settings.roots)
    require(lines <= settings.max_lines, f"lines may be at most {settings.max_lines} for this agent")
    match = line_filter(contains, compile_pattern(contains) if contains and regex else None)
    parts = await scan_in_thread(
        lambda limits: tail_logs(real, settings.roots, lines, match, limits, settings.rotated),
        settings.limits(ctx.redact),
    )
    what = f"lines containing {contains!r}" if contains else "lines"
    return render(parts, settings.max_output_chars, f"No {what} in {real}.")
