"""`yokebot run` with a Discord token: the runner connects, answers, and stops cleanly. Plus the pure parts:
the 2,000-character split and the routing / access rules."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.chat.discord_adapter import invite_url
from bot.chat.discord_output import LIMIT
from bot.chat.discord_routing import Origin, comma_list, entries, permitted, route
from bot.chat.formatting import split_message
from bot.engine.profiles import AgentProfile
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


def profile(name: str, channels: tuple[str, ...]) -> AgentProfile:
    return AgentProfile(name=name, path=Path(name), system_prompt="x", channels=channels)


def test_routing_by_channel_id_name_and_dm_with_default_fallback():
    profiles = {
        "ops": profile("ops", ("discord:10", "slack:#random")),
        "web": profile("web", ("#web",)),
        "helpdesk": profile("helpdesk", ("dm",)),
    }
    assert route(profiles, Origin("10", "general", "u"), "fallback") == "ops"
    assert route(profiles, Origin("11", "web", "u"), "fallback") == "web"
    assert route(profiles, Origin("12", "random", "u"), "fallback") == "fallback"  # slack entries ignored
    assert route(profiles, Origin("99", None, "u", dm=True), "fallback") == "helpdesk"
    assert route({"ops": profiles["ops"]}, Origin("99", None, "u", dm=True), "fallback") == "fallback"


def test_access_lists_combine_channels_with_users_or_roles():
    users, roles, channels = (
        entries(["discord:1", "slack:U9"]),
        comma_list("50, oncall"),
        comma_list("#ops,20"),
    )
    assert users == {"1"}
    ok = Origin("20", "x", "2", frozenset({"50"}))
    assert permitted(users, roles, channels, ok)
    assert permitted(users, roles, channels, Origin("30", "ops", "1"))  # channel by name, user by ID
    assert not permitted(users, roles, channels, Origin("30", "general", "1"))  # wrong channel
    assert not permitted(users, roles, channels, Origin("20", "x", "3", frozenset({"51"})))  # neither
    assert not permitted(frozenset(), frozenset(), channels, Origin("5", None, "1", dm=True))  # DMs need "dm"
    assert permitted(
        frozenset(), frozenset(), frozenset(), Origin("5", None, "1", dm=True)
    )  # nothing set: all


def test_the_documented_invite_url_grants_what_the_adapter_needs():
    url = invite_url(123)
    permissions = url.split("permissions=")[1].split("&")[0]
    docs = (Path(__file__).parents[2] / "docs" / "discord.md").read_text()
    assert f"scope=bot&permissions={permissions}" in docs
