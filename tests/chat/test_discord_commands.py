"""`/yokebot <sub>` on Discord through the real discord.py (`app_commands`) against the fake Discord: the tree
synced at start, an application-command interaction deferred at once and answered by follow-up (ephemeral but
for `ask`, whose answer is a thread on the response). docs/commands.md."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build_app
from bot.chat.discord.adapter import DiscordAdapter
from tests.chat.test_discord import TOKEN
from tests.conftest import make_settings, rows
from tests.fakes.discord_server import ALICE, CAROL, GENERAL, GUILD_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import build_discord, eventually, registry

REFUSED = "Sorry, you don't have access to me here. Ask your yokebot admin if you need it."


async def start(sqlite_url: str, llm: FakeOpenAI, agents: Path, fake: FakeDiscord,
                **overrides: Any) -> tuple[App, DiscordAdapter]:
    settings = make_settings(sqlite_url, llm, agents, default_agent="ops", discord_bot_token=TOKEN,
                             discord_api_url=fake.api_url, discord_gateway_url=fake.gateway_url,
                             discord_guild_ready_timeout=0.05, **overrides)
    app = await build_app(settings, registry=registry())
    adapter = build_discord(app)
    assert adapter is not None
    await adapter.start(within=10)
    return app, adapter


@pytest.fixture
async def bot(sqlite_url: str, fake_llm: FakeOpenAI, discord_agents: Path,
              fake_discord: FakeDiscord) -> AsyncIterator[tuple[App, DiscordAdapter]]:
    app, adapter = await start(sqlite_url, fake_llm, discord_agents, fake_discord)
    yield app, adapter
    await adapter.stop()
    await app.close()


async def test_the_command_is_registered_globally_with_its_sub_commands(bot: tuple[App, DiscordAdapter],
                                                                        fake_discord: FakeDiscord):
    [command] = fake_discord.app_commands["global"]
    assert command["name"] == "yokebot"
    subs = {o["name"]: o for o in command["options"]}
    assert sorted(subs) == ["alerts", "approvals", "ask", "help", "reset", "status", "usage"]
    assert subs["ask"]["options"][0]["name"] == "question" and subs["ask"]["options"][0]["required"]
    assert [c["value"] for c in subs["usage"]["options"][0]["choices"]] == ["today", "7d"]


async def test_ask_is_deferred_then_answered_in_a_thread_on_the_response(
        bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI):
    app, _ = bot
    fake_llm.reply("nginx is fine.")
    iid = fake_discord.command("ask", {"question": "is nginx up?"})
    await eventually(lambda: any(c.interaction == iid for c in fake_discord.callbacks), what="the deferral")
    [deferral] = [c for c in fake_discord.callbacks if c.interaction == iid]
    assert deferral.type == 5 and not deferral.ephemeral and deferral.seconds < 3.0
    await eventually(lambda: any(p.content == "nginx is fine." for p in fake_discord.posted), what="the answer")
    root = fake_discord.originals[iid]
    assert root.content == f"<@{ALICE}> asked: is nginx up?"
    assert root.id in fake_discord.threads  # the thread is opened on the response
    assert [p.content for p in fake_discord.posted_in(root.id)] == ["nginx is fine."]
    turns = await rows(app, "SELECT t.trigger, s.thread FROM turns t JOIN sessions s ON s.id = t.session_id")
    assert [(t.trigger, t.thread) for t in turns] == [("command", str(root.id))]
    assert [r.event_key for r in await rows(app, "SELECT event_key FROM inbox")] == [str(iid)]


async def test_a_question_longer_than_a_message_is_asked_whole_and_shown_cut(
        bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI):
    """Discord's option takes 6,000 characters, a message 2,000: the response refused a long question, and the
    caller was told to invite the bot to a channel it was in."""
    fake_llm.reply("read it all.")
    question = "why? " + "the log says 502 " * 200
    iid = fake_discord.command("ask", {"question": question})
    await eventually(lambda: any(p.content == "read it all." for p in fake_discord.posted), what="the answer")
    root = fake_discord.originals[iid]
    assert len(root.content) <= 2000 and root.content.startswith(f"<@{ALICE}> asked: why? the log says 502")
    assert root.content.endswith("…") and root.id in fake_discord.threads
    assert fake_llm.requests[0]["messages"][-1]["content"] == question.strip()


async def test_status_is_ephemeral_and_a_refused_user_gets_the_mentions_sentence(
        bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI):
    iid = fake_discord.command("status")
    await eventually(lambda: fake_discord.followed_up(iid), what="the status")
    [deferral] = [c for c in fake_discord.callbacks if c.interaction == iid]
    assert deferral.type == 5 and deferral.ephemeral
    [said] = fake_discord.followed_up(iid)
    assert said["flags"] & 64 and "yokebot is up" in said["content"] and "agent `ops`" in said["content"]

    refused = fake_discord.command("ask", {"question": "restart prod"}, author=CAROL)
    await eventually(lambda: fake_discord.followed_up(refused), what="the refusal")
    [said] = fake_discord.followed_up(refused)
    assert said["content"] == REFUSED and said["flags"] & 64
    await eventually(lambda: refused in fake_discord.originals or
                     any(c.interaction == refused for c in fake_discord.callbacks), what="the deferral")
    assert not fake_llm.requests  # neither reached the model
    assert not [p for p in fake_discord.posted if p.channel == GENERAL]


async def test_an_answer_full_of_broadcasts_still_fits_discords_messages(
        bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord):
    """The answer was split into messages of 2,000 characters, then each defused: a word joiner after every
    `@here` made a message longer than Discord takes, and alert titles written so made `/yokebot alerts` fail."""
    from datetime import UTC, datetime

    from sqlalchemy import insert

    from bot.alerts.tables import AlertGroupRow

    app, _ = bot
    async with app.engine.begin() as conn:
        for i in range(4):
            await conn.execute(insert(AlertGroupRow.__table__).values(
                source="alertmanager", group_hash=f"h{i}", group_key=f"k{i}", agent="ops",
                post_to=f"discord:{GENERAL}", title=f"T{i} " + "@here " * 82, state="firing", alerts={"x": "firing"},
                root_platform="discord", root_channel=str(GENERAL), root_ref=str(1000 + i), thread=str(2000 + i),
                fired_at=datetime.now(UTC)))
    iid = fake_discord.command("alerts")
    await eventually(lambda: len(fake_discord.followed_up(iid)) >= 2, what="the answer")
    said = [m["content"] for m in fake_discord.followed_up(iid)]
    assert all(len(m) <= 2000 for m in said) and all(f"T{i} @\u2060here" in "".join(said) for i in range(4))


async def test_a_command_from_a_guild_the_bot_is_not_in_is_refused_before_anything_is_stored(
        bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord):
    app, _ = bot
    iid = fake_discord.command("status", guild=GUILD_ID + 99)
    await eventually(lambda: any(c.interaction == iid for c in fake_discord.callbacks), what="the answer")
    [answer] = [c for c in fake_discord.callbacks if c.interaction == iid]
    assert answer.type == 4 and answer.ephemeral and "does not serve this server" in answer.data["content"]
    assert await rows(app, "SELECT * FROM inbox") == []


async def test_with_command_guilds_the_command_is_registered_in_each_guild_only(
        sqlite_url: str, fake_llm: FakeOpenAI, discord_agents: Path, fake_discord: FakeDiscord):
    app, adapter = await start(sqlite_url, fake_llm, discord_agents, fake_discord,
                               discord_command_guilds=[str(GUILD_ID)])
    try:
        assert "global" not in fake_discord.app_commands
        assert [c["name"] for c in fake_discord.app_commands[str(GUILD_ID)]] == ["yokebot"]
        iid = fake_discord.command("help")
        await eventually(lambda: fake_discord.followed_up(iid), what="the help")
        assert "/yokebot usage [today|7d]" in fake_discord.followed_up(iid)[0]["content"]
    finally:
        await adapter.stop()
        await app.close()


async def test_doctor_says_whether_the_command_is_registered(
        sqlite_url: str, fake_llm: FakeOpenAI, discord_agents: Path, fake_discord: FakeDiscord):
    from bot.chat.core.commands import NAME
    from bot.chat.discord import manifest

    assert manifest.COMMAND == NAME
    settings = make_settings(sqlite_url, fake_llm, discord_agents, discord_bot_token=TOKEN,
                             discord_api_url=fake_discord.api_url)
    before = await manifest.doctor(settings)
    assert before[1].warning and before[1].detail == "/yokebot is not registered globally"
    app, adapter = await start(sqlite_url, fake_llm, discord_agents, fake_discord)
    try:
        after = await manifest.doctor(settings)
        assert after[1].ok and not after[1].warning and after[1].detail == "/yokebot is registered globally"
    finally:
        await adapter.stop()
        await app.close()


async def test_asks_live_status_is_noted_on_its_inbox_row_for_recovery(
        sqlite_url: str, fake_llm: FakeOpenAI, discord_agents: Path, fake_discord: FakeDiscord):
    app, adapter = await start(sqlite_url, fake_llm, discord_agents, fake_discord, progress_live=True)
    try:
        fake_llm.reply("all good", delay=0.3)
        iid = fake_discord.command("ask", {"question": "all good?"})
        await eventually(lambda: any(p.content == "all good" for p in fake_discord.posted), what="the answer")
        root = fake_discord.originals[iid]
        [row] = await rows(app, "SELECT status_ref FROM inbox")
        assert row.status_ref is not None and row.status_ref.startswith(f"{root.id}/")  # in the ask's thread
    finally:
        await adapter.stop()
        await app.close()
