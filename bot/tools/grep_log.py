from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from pydantic import Field

from bot.engine.run import ToolContext, require, tool
from bot.tools.logfiles import (
    FileLines,
    LogToolSettings,
    ScanLimits,
    clean_line,
    forward_lines,
    line_filter,
    line_time,
    open_log,
    parse_since,
    render,
    scan_in_thread,
)
from bot.tools.patterns import UserPattern, compile_pattern
from bot.tools.sandbox import resolve_allowed


@dataclass(frozen=True, slots=True)
class GrepQuery:
    pattern: UserPattern
    since: datetime | None
    max_matches: int
    tz: ZoneInfo
    now: datetime


def grep_file(real: Path, roots: tuple[str, ...], q: GrepQuery, limits: ScanLimits) -> tuple[FileLines, int]:
    """Scan forward (only the last `max_scan_bytes` of a big file); keep the LAST `max_matches` matches."""
    fh, size, gz = open_log(real, roots)
    kept: deque[str] = deque(maxlen=q.max_matches)
    total, stamp = 0, None
    start = 0 if gz else max(0, size - limits.max_scan_bytes)
    filt = line_filter(None, q.pattern)

    def skipped(block: bytes) -> None:
        # continuation lines inherit the time of the last stamped line, also across a skipped block
        nonlocal stamp
        if q.since is not None:
            for raw in reversed(block[-8 * limits.max_line_bytes :].split(b"\n")):
                if found := line_time(clean_line(raw, 200), q.tz, q.now):
                    stamp = found
                    return

    with fh:
        for raw, cut in forward_lines(fh, limits, start, filt.block_test(), skipped):
            text = clean_line(raw, limits.max_line_bytes, cut, limits.redact)
            if q.since is not None:
                stamp = line_time(text, q.tz, q.now) or stamp
                if stamp is None or stamp < q.since:
                    continue
            if filt.line(text):
                total += 1
                kept.append(text)
    out = FileLines(real, list(kept))
    if start:
        out.note = f"only the last {limits.max_scan_bytes} of {size} bytes were searched"
    return out, total


@tool(
    "grep_log",
    "Find the lines of a log file that match a regular expression, optionally only those logged since a time "
    "('15m', '2h', '1d' or '2024-05-01 12:00'). Use it to count or collect specific errors over a period "
    "(e.g. pattern ' 502 ' or 'upstream timed out'); for just the latest lines use tail_log. Returns the "
    "most recent `max_matches` matches and the total count.",
    settings=LogToolSettings,
    timeout=120.0,
)
async def grep_log(
    ctx: ToolContext[LogToolSettings],
    path: str,
    pattern: str,
    since: str | None = None,
    max_matches: int = Field(default=200, ge=1, le=20_000),
    ignore_case: bool = False,
) -> str:
    settings = ctx.settings
    real = resolve_allowed(path, settings.roots)
    require(
        max_matches <= settings.max_lines, f"max_matches may be at most {settings.max_lines} for this agent"
    )
    tz = ZoneInfo(ctx.timezone)
    now = datetime.now(UTC)
    q = GrepQuery(
        compile_pattern(pattern, ignore_case),
        parse_since(since, now, tz) if since else None,
        max_matches,
        tz,
        now,
    )
    part, total = await scan_in_thread(
        lambda limits: grep_file(real, settings.roots, q, limits), settings.limits(ctx.redact)
    )
    when = f" since {q.since:%Y-%m-%d %H:%M:%S %Z}" if q.since else ""
    if total == 0:
        return render([part], settings.max_output_chars, f"No line of {real} matches {pattern!r}{when}.")
    head = f"{total} lines match {pattern!r}{when}"
    if total > len(part.lines):
        head += f"; the last {len(part.lines)} are shown"
    return head + ".\n" + render([part], settings.max_output_chars, "")
