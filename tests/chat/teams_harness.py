"""The Teams adapter as `yokebot run` builds it (bot/app.py `build_one`), its route mounted on an HTTP server of
its own on 127.0.0.1, against the fake Teams (tests/fakes/teams.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, cast

from aiohttp import web

from bot.app import App, build_one
from tests.helpers import free_port

if TYPE_CHECKING:
    from bot.chat.teams.adapter import TeamsAdapter


@asynccontextmanager
async def teams_bot(app: App) -> AsyncIterator[tuple[TeamsAdapter, str]]:
    """(the adapter, its `/teams/messages` URL); stopped (drained) and closed on exit."""
    adapter = cast("TeamsAdapter", build_one(app, "teams"))
    http = web.Application()
    adapter.mount(http)
    runner = web.AppRunner(http)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await adapter.start()
    try:
        yield adapter, f"http://127.0.0.1:{port}/teams/messages"
    finally:
        await adapter.stop()
        await runner.cleanup()
