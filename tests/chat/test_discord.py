"""Discord end to end: real discord.py over real sockets to the fake Discord, the real openai SDK to the fake
model, turns audited in SQLite. What a user would see is read from what the fake recorded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build_app
from bot.chat.discord_adapter import DiscordAdapter
from bot.engine.tooling import ToolContext, tool
from tests.conftest import make_settings, rows
from tests.fakes.discord_server import (
    ALICE,
    BOB,
    DM_CHANNEL,
    GENERAL,
    ONCALL_ROLE,
    OPS_ALERTS,
    OTHER,
    OTHER_BOT,
    FakeDiscord,
)
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import registry, write_agent

TOKEN = "discord-test-token-0123456789"


@tool("notify", "Post a short alert to the team channel. Test-only stand-in until the tools branch lands.")
async def notify(ctx: ToolContext, text: str, target: str = f"discord:{OPS_ALERTS}") -> str:
    assert ctx.notifier is not None
    return f"posted as {await ctx.notifier.notify(target, text)}"


def ops_profile(log_dir: Path) -> str:
    return f"""
description: ops test agent
tools:
  read_file:
    roots: [{log_dir}]
  notify: {{}}
access:
  roles: ["{ONCALL_ROLE}"]
  users: ["discord:{BOB}"]
"""


async def eventually(predicate: Callable[[], Any], timeout: float = 8.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


@pytest.fixture
def fake_discord() -> Iterator[FakeDiscord]:
    server = FakeDiscord().start()
    yield server
    server.stop()


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    d = tmp_path / "logs"
    d.mkdir()
    (d / "error.log").write_text("2025/01/01 10:00:01 [error] upstream timed out (502) while reading\n" * 3)
    return d


@pytest.fixture
def discord_agents(agents_dir: Path, log_dir: Path) -> Path:
    write_agent(agents_dir, "ops", ops_profile(log_dir))
    write_agent(agents_dir, "other", f"description: routed by channel\nchannels: ['discord:{OTHER}']")
    return agents_dir


async def start_bot(sqlite_url: str, llm: FakeOpenAI, agents: Path, fake: FakeDiscord,
                    **overrides: Any) -> tuple[App, DiscordAdapter]:
    settings = make_settings(sqlite_url, llm, agents, default_agent="ops", discord_bot_token=TOKEN,
                             discord_api_url=fake.api_url, discord_gateway_url=fake.gateway_url,
                             discord_guild_ready_timeout=0.05, **overrides)
    app = await build_app(settings, registry={**registry(), "notify": notify})
    adapter = DiscordAdapter(app.service, settings, app.profiles)
    await adapter.start(timeout=10)
    app.notifier.register(adapter)
    return app, adapter


@pytest.fixture
async def discord_bot(sqlite_url: str, fake_llm: FakeOpenAI, discord_agents: Path,
                      fake_discord: FakeDiscord) -> AsyncIterator[tuple[App, DiscordAdapter]]:
    app, adapter = await start_bot(sqlite_url, fake_llm, discord_agents, fake_discord)
    yield app, adapter
    await adapter.stop()
    await app.close()


async def test_dm_is_answered_in_the_dm_channel(discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord,
                                                fake_llm: FakeOpenAI):
    fake_llm.reply("Hello from ops.")
    mid = fake_discord.dm("hello there")
    await eventually(lambda: fake_discord.reactions)
    assert [p.content for p in fake_discord.posted_in(DM_CHANNEL)] == ["Hello from ops."]
    assert fake_discord.reactions == [(DM_CHANNEL, mid, "✅")]
    assert fake_llm.requests[0]["messages"][-1] == {"role": "user", "content": "hello there"}
