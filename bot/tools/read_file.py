from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import Field

from bot.engine.tooling import ToolContext, ToolSettings, require, tool
from bot.tools.sandbox import resolve_allowed


class ReadFileSettings(ToolSettings):
    roots: tuple[str, ...] = ()
    max_bytes: int = Field(default=65_536, ge=1, le=10_000_000)


def _read(path: Path, limit: int) -> tuple[bytes, int]:
    with path.open("rb") as fh:
        data = fh.read(limit + 1)
        size = path.stat().st_size
    return data, size


@tool(
    "read_file",
    "Read the beginning of a text file the agent is allowed to see (configuration, a small log, a report). "
    "Use it when you need a file's content; for the end of a big log use tail_log instead.",
    settings=ReadFileSettings,
)
async def read_file(ctx: ToolContext, path: str, max_bytes: int | None = None) -> str:
    settings = ctx.settings
    assert isinstance(settings, ReadFileSettings)
    real = resolve_allowed(path, settings.roots)
    require(real.is_file(), f"{path} is not a regular file (or does not exist)")
    limit = min(max_bytes or settings.max_bytes, settings.max_bytes)
    data, size = await asyncio.to_thread(_read, real, limit)
    text = data[:limit].decode("utf-8", errors="replace")
    if size > limit:
        text += f"\n[cut: showed the first {limit} of {size} bytes]"
    return text
