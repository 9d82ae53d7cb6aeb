"""`yokebot run` with a Discord token: the runner connects, answers, and stops cleanly. Plus the pure parts:
the 2,000-character split (routing and access: tests/chat/test_access.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.chat.core.formatting import split_message
from bot.chat.discord.adapter import invite_url
from bot.chat.discord.output import LIMIT
from bot.runner import serve
from tests.chat.test_discord import TOKEN
from tests.conftest import make_settings
from tests.fakes.discord_server import DM_CHANNEL, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import eventually, write_agent


async def test_yokebot_run_serves_discord_and_stops_cleanly(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_discord: FakeDiscord
):
    agents = tmp_path / "run-agents"
    write_agent(agents, "ops", "description: plain\ntools: [current_time]")
    settings = make_settings(
        sqlite_url,
        fake_llm,
        agents,
        default_agent="ops",
        http_port=0,
        discord_bot_token=TOKEN,
        discord_api_url=fake_discord.api_url,
        discord_gateway_url=fake_discord.gateway_url,
        discord_guild_ready_timeout=0.05,
    )
    stop = asyncio.Event()
    server = asyncio.create_task(serve(settings, stop))
    fake_llm.reply("served by yokebot run", delay=0.3)
    await eventually(lambda: 2 in fake_discord.ops)  # IDENTIFY: connected
    mid = fake_discord.dm("are you there?")
    await eventually(lambda: fake_llm.requests)
    stop.set()  # SIGTERM while the turn is in flight: it is finished, not lost
    await asyncio.wait_for(server, timeout=10)
    assert [p.content for p in fake_discord.posted_in(DM_CHANNEL)] == ["served by yokebot run"]
    assert fake_discord.reactions == [(DM_CHANNEL, mid, "✅")]


def test_split_respects_discord_2000_limit_and_fences():
    text = (
        "intro\n```python\n"
        + "\n".join(f"x_{i} = {i} * 2  # a line of code" for i in range(150))
        + "\n```\nbye"
    )
    parts = split_message(text, LIMIT)
    assert len(parts) >= 3 and all(len(p) <= 2000 for p in parts)
    assert all(p.count("```") % 2 == 0 for p in parts)
    assert split_message("short", LIMIT) == ["short"]
    long_line = "y" * 4500  # no line boundary at all: hard-wrapped, still within the limit
    assert "".join(split_message(long_line, LIMIT)) == long_line
    assert all(len(p) <= 2000 for p in split_message(long_line, LIMIT))


def test_the_documented_invite_url_grants_what_the_adapter_needs():
    url = invite_url(123)
    permissions = url.split("permissions=")[1].split("&")[0]
    docs = (Path(__file__).parents[2] / "docs" / "discord.md").read_text()
    assert f"scope=bot+applications.commands&permissions={permissions}" in docs  # the bot and its /yokebot
