from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field

from bot.engine.run import ToolContext, tool
from bot.engine.spec import ToolSettings
from bot.redact import LOOKAHEAD, cut, printable
from bot.tools.sandbox import open_allowed, resolve_allowed


class ReadFileSettings(ToolSettings):
    roots: tuple[str, ...] = ()
    max_bytes: int = Field(default=65_536, ge=1, le=10_000_000)

    def folders(self) -> tuple[str, ...]:
        return self.roots


def _read(path: Path, roots: Sequence[str], limit: int) -> tuple[bytes, int]:
    """The first `limit` bytes and a LOOKAHEAD more, so a secret at the cut is redacted whole before it."""
    fd = open_allowed(path, roots)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fd).st_size
        return fh.read(limit + LOOKAHEAD), size


def looks_binary(data: bytes) -> bool:
    return b"\x00" in data[:8192]


@tool(
    "read_file",
    "Read the beginning of a text file the agent is allowed to see (configuration, a small log, a report). "
    "Use it when you need a file's content; for the end of a big log use tail_log instead.",
    settings=ReadFileSettings,
)
async def read_file(
    ctx: ToolContext[ReadFileSettings], path: str, max_bytes: int | None = Field(default=None, ge=1)
) -> str:
    settings = ctx.settings
    real = resolve_allowed(path, settings.roots)
    limit = min(max_bytes or settings.max_bytes, settings.max_bytes)
    data, size = await asyncio.to_thread(_read, real, settings.roots, limit)
    text = printable(data.decode("utf-8", errors="replace"))
    shown = len(printable(data[:limit].decode("utf-8", errors="replace")))
    text, was_cut = cut(text, shown, ctx.redact) if len(data) > limit else (text, False)
    if looks_binary(data):
        text = f"[{real} looks like a binary file; undecodable bytes are shown as \ufffd]\n{text}"
    if was_cut or size > len(data):
        text += f"\n[cut: showed about the first {limit} of {size} bytes]"
    return text
