from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.engine.run import ToolContext, require, tool
from bot.engine.spec import ToolSettings


@tool(
    "current_time",
    "Get the current date and time. Use it when the answer depends on the exact time now (ages of log "
    "lines, 'how long ago', deadlines) or on the time in another timezone.",
)
async def current_time(ctx: ToolContext[ToolSettings], timezone: str | None = None) -> str:
    name = timezone or ctx.timezone
    try:
        tz = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        tz = None
    require(tz is not None, f"unknown timezone {name!r}; use an IANA name like 'Europe/Berlin' or 'UTC'")
    now = datetime.now(UTC).astimezone(tz)
    return f"{now:%A %Y-%m-%d %H:%M:%S} {name} (UTC{now:%z}); ISO {now.isoformat(timespec='seconds')}"
