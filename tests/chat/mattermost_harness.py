"""The Mattermost adapter as `yokebot run` builds it, against the fake Mattermost (tests/fakes/mattermost.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

from aiohttp import web

from bot.app import App, build_app, build_one
from bot.chat.mattermost.adapter import MattermostAdapter
from bot.config import Settings
from tests.conftest import make_settings
from tests.fakes.mattermost import TOKEN, FakeMattermost
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import registry


def mm_settings(db: str, llm: FakeOpenAI, agents: Path, fake: FakeMattermost, **extra: Any) -> Settings:
    return make_settings(db, llm, agents, mattermost_url=fake.url, mattermost_bot_token=TOKEN, **extra)


@asynccontextmanager
async def mattermost(settings: Settings, *, http: bool = False) -> AsyncIterator[tuple[App, MattermostAdapter]]:
    """A built app and its connected Mattermost adapter; `http`: yokebot's HTTP server too, on the port of
    `YOKEBOT_MATTERMOST_ACTIONS_URL` (the approval buttons' clicks)."""
    app = await build_app(settings, registry=registry())
    adapter = cast(MattermostAdapter, build_one(app, "mattermost"))
    runner: web.AppRunner | None = None
    try:
        if http:
            server = web.Application()
            adapter.mount(server)
            runner = web.AppRunner(server)
            await runner.setup()
            port = int(str(settings.mattermost_actions_url).rsplit(":", 1)[1])
            await web.TCPSite(runner, "127.0.0.1", port).start()
        await adapter.start(within=10)
        yield app, adapter
    finally:
        await adapter.stop()
        if runner is not None:
            await runner.cleanup()
        await app.close()
