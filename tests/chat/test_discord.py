"""Discord end to end: real discord.py over real sockets to the fake Discord, the real openai SDK to the fake
model, turns audited in SQLite. What a user would see is read from what the fake recorded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build_app
from bot.chat.core.platform import PlatformParts
from bot.chat.discord.adapter import DiscordAdapter
from bot.engine.errors import ConfigError, ToolFailed
from tests.conftest import make_settings, rows
from tests.fakes.discord_server import (
    BOB,
    BOT_ID,
    CAROL,
    DM_CHANNEL,
    GENERAL,
    ONCALL_ROLE,
    OPS_ALERTS,
    OTHER,
    OTHER_BOT,
    FakeDiscord,
)
from tests.fakes.openai_server import FakeOpenAI, Step, call
from tests.helpers import eventually, registry, tool_messages

TOKEN = "discord-test-token-0123456789"


async def start_bot(
    sqlite_url: str, llm: FakeOpenAI, agents: Path, fake: FakeDiscord, **overrides: Any
) -> tuple[App, DiscordAdapter]:
    settings = make_settings(
        sqlite_url,
        llm,
        agents,
        default_agent="ops",
        discord_bot_token=TOKEN,
        discord_api_url=fake.api_url,
        discord_gateway_url=fake.gateway_url,
        discord_guild_ready_timeout=0.05,
        **overrides,
    )
    app = await build_app(settings, registry=registry())
    # as build_discord does: messages are claimed in the durable inbox
    adapter = DiscordAdapter(PlatformParts(settings, app.service, app.profiles, app.store, app.metrics,
                                           app.inbox_turns))
    await adapter.start(within=10)
    app.notifier.register(adapter)
    return app, adapter


@pytest.fixture
async def discord_bot(
    sqlite_url: str, fake_llm: FakeOpenAI, discord_agents: Path, fake_discord: FakeDiscord
) -> AsyncIterator[tuple[App, DiscordAdapter]]:
    app, adapter = await start_bot(sqlite_url, fake_llm, discord_agents, fake_discord)
    yield app, adapter
    await adapter.stop()
    await app.close()


async def test_dm_is_answered_in_the_dm_channel(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI
):
    fake_llm.reply("Hello from ops.")
    mid = fake_discord.dm("hello there")
    await eventually(lambda: fake_discord.reactions)
    assert [p.content for p in fake_discord.posted_in(DM_CHANNEL)] == ["Hello from ops."]
    assert fake_discord.reactions == [(DM_CHANNEL, mid, "✅")]
    assert fake_llm.requests[0]["messages"][-1] == {"role": "user", "content": "hello there"}


def answered(fake: FakeDiscord, message_id: int) -> bool:
    return any(m == message_id for _, m, _ in fake.reactions)


async def test_ops_scenario_mention_thread_tools_notify_answer(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI, log_dir: Path
):
    """The story that must always work, with the shipped ops agent and the real tail_log and notify."""
    app, _ = discord_bot
    fake_llm.calls(call("tail_log", {"path": str(log_dir / "error.log"), "contains": "502"}))
    fake_llm.calls(call("notify", {"message": "nginx: 502s since 10:00 (upstream 10.0.0.7 timed out)"}))
    fake_llm.reply("**Degraded**: 3 upstream errors (502) since 10:00. I alerted #ops-alerts.")

    mid = fake_discord.mention("check the recent nginx error logs; if something's wrong, push it to the team channel")
    await eventually(lambda: answered(fake_discord, mid))

    # a thread on the triggering message, named after the question, and the answer inside it
    assert list(fake_discord.threads) == [mid]
    assert fake_discord.threads[mid]["name"].startswith("check the recent nginx error logs")
    assert [p.content for p in fake_discord.posted_in(mid)] == [
        "**Degraded**: 3 upstream errors (502) since 10:00. I alerted #ops-alerts."
    ]
    assert fake_discord.posted_in(GENERAL) == []  # nothing in the channel itself
    assert mid in fake_discord.typing  # "typing…" in the thread while the agent worked
    # the alert reached the team channel (found by its name) through the adapter
    [alert] = fake_discord.posted_in(OPS_ALERTS)
    assert alert.content == "nginx: 502s since 10:00 (upstream 10.0.0.7 timed out)"
    assert fake_discord.reactions == [(GENERAL, mid, "✅")]
    # the model got the shipped agent's prompt, the mention without the bot's <@id>, and the 502 lines
    assert fake_llm.requests[0]["messages"][0]["content"].startswith("You are yokebot's **ops** agent")
    assert fake_llm.requests[0]["messages"][-1]["content"].startswith("check the recent nginx")
    seen = tool_messages(fake_llm.requests[1])[0]["content"].splitlines()
    assert len(seen) == 4 and all("HTTP/1.1 502" in line for line in seen[1:])
    posted = f"Posted to discord:#ops-alerts (ref discord:{OPS_ALERTS}/{alert.id})."
    assert tool_messages(fake_llm.requests[2])[-1]["content"] == posted

    sessions = await rows(app, "SELECT id, platform, channel, thread, agent FROM sessions")
    assert [(s.platform, s.channel, s.thread, s.agent) for s in sessions] == [
        ("discord", str(GENERAL), str(mid), "ops")
    ]
    assert len(await rows(app, "SELECT id FROM llm_calls")) == 3
    tools = await rows(app, "SELECT tool, status, result FROM tool_invocations ORDER BY id")
    assert [(t.tool, t.status) for t in tools] == [("tail_log", "ok"), ("notify", "ok")]
    assert tools[1].result == posted


async def test_thread_follow_up_continues_the_session_without_a_mention(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI
):
    app, _ = discord_bot
    fake_llm.reply("The error rate is 2%.").reply("It was 0.1% yesterday.")
    first = fake_discord.mention("what is the error rate?")
    await eventually(lambda: answered(fake_discord, first))
    second = fake_discord.send_message(first, "and yesterday?")  # inside the bot's thread, no mention
    await eventually(lambda: answered(fake_discord, second))

    assert [p.content for p in fake_discord.posted_in(first)] == [
        "The error rate is 2%.",
        "It was 0.1% yesterday.",
    ]
    assert list(fake_discord.threads) == [first]  # no second thread
    sent = [(m["role"], m["content"]) for m in fake_llm.requests[1]["messages"][1:]]
    assert sent == [
        ("user", "what is the error rate?"),
        ("assistant", "The error rate is 2%."),
        ("user", "and yesterday?"),
    ]
    assert len(await rows(app, "SELECT id FROM sessions")) == 1


async def test_the_bot_stays_silent_where_it_was_not_asked(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI
):
    fake_discord.send_message(GENERAL, "just chatting, no mention")
    fake_discord.send_message(GENERAL, f"<@{BOT_ID}> talking to myself", author=BOT_ID, mention_bot=True)
    fake_discord.send_message(GENERAL, f"<@{BOT_ID}> beep", author=OTHER_BOT, mention_bot=True)
    fake_discord.dm("a bot in my DMs", author=OTHER_BOT)
    edited = fake_discord.send_message(GENERAL, "typo")
    fake_discord.edit_message(edited, GENERAL, f"<@{BOT_ID}> fixed")  # edits are ignored
    fake_llm.reply("only this one")
    last = fake_discord.dm("ping")  # handled after the others, so by now they were all seen
    await eventually(lambda: answered(fake_discord, last))
    await asyncio.sleep(0.1)
    assert [r["messages"][-1]["content"] for r in fake_llm.requests] == ["ping"]
    assert [p.content for p in fake_discord.posted] == ["only this one"]
    assert fake_discord.threads == {}
    counted = discord_bot[0].metrics.value
    assert counted("yokebot_adapter_events_total", platform="discord", kind="ignored") == 5
    assert counted("yokebot_adapter_events_total", platform="discord", kind="dm") == 1


async def test_a_5000_character_answer_is_split_on_lines_and_fences(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI
):
    code = "\n".join(f"line {i:03d}: upstream timed out while reading response header" for i in range(60))
    answer = (
        "Here is the log:\n```nginx\n"
        + code
        + "\n```\n"
        + "\n".join(f"- finding {i}: worker {i} restarted" for i in range(40))
    )
    assert 4500 < len(answer) < 6000
    fake_llm.reply(answer)
    mid = fake_discord.dm("show me the log")
    await eventually(lambda: answered(fake_discord, mid))

    parts = [p.content for p in fake_discord.posted_in(DM_CHANNEL)]
    assert len(parts) == 3 and all(len(p) <= 2000 for p in parts)
    for p in parts:
        assert p.count("```") % 2 == 0  # every message renders its code block on its own
    assert parts[1].startswith("```nginx\n")  # the fence is reopened with its language
    body = [ln for p in parts for ln in p.split("\n") if not ln.startswith("```")]
    assert body == [ln for ln in answer.split("\n") if not ln.startswith("```")]  # nothing lost or doubled


async def test_an_answer_quoting_many_broadcasts_is_split_after_they_are_defused(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI
):
    """Split at 2,000 characters, then defused: the word joiner after each `@here` (a log line quoted) made a
    message longer than Discord takes, and the whole answer became an apology."""
    answer = "\n".join(f"{i:03d} @here @here @here @here @here deploy" for i in range(70))
    assert 2000 < len(answer) < 6000
    fake_llm.reply(answer)
    mid = fake_discord.dm("what did the log say?")
    await eventually(lambda: answered(fake_discord, mid))
    parts = [p.content for p in fake_discord.posted_in(DM_CHANNEL)]
    assert all(len(p) <= 2000 for p in parts) and "\n".join(parts) == answer.replace("@here", "@\u2060here")

    fake_llm.reply("\n".join([answer] * 3))  # over 6,000: a preview and the file
    mid = fake_discord.dm("and the whole log?")
    await eventually(lambda: answered(fake_discord, mid))
    preview = fake_discord.posted_in(DM_CHANNEL)[-1]
    assert len(preview.content) <= 2000 and "attached as `answer.md`" in preview.content


async def test_a_very_long_answer_comes_as_a_file(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI
):
    answer = "\n".join(f"{i:05d} GET /api/items 502" for i in range(600))
    assert len(answer) > 6000
    fake_llm.reply(answer)
    mid = fake_discord.dm("dump the 502s")
    await eventually(lambda: answered(fake_discord, mid))
    [posted] = fake_discord.posted_in(DM_CHANNEL)
    assert posted.files == {"answer.md": answer.encode()}
    assert len(posted.content) <= 2000 and "attached as `answer.md`" in posted.content
    assert posted.content.startswith("00000 GET /api/items 502")


async def test_a_429_on_send_is_waited_out_and_the_answer_posted_once(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI
):
    fake_discord.rate_limit("POST", f"/channels/{DM_CHANNEL}/messages", retry_after=0.3)
    fake_llm.reply("after the rate limit")
    mid = fake_discord.dm("hello")
    await eventually(lambda: answered(fake_discord, mid))
    assert [p.content for p in fake_discord.posted_in(DM_CHANNEL)] == ["after the rate limit"]
    sends = [r for r in fake_discord.requests if r[:2] == ("POST", f"/channels/{DM_CHANNEL}/messages")]
    assert len(sends) == 2  # the 429, then discord.py's own retry after retry_after
    assert fake_discord.reactions == [(DM_CHANNEL, mid, "✅")]


async def test_a_gateway_reconnect_mid_conversation_resumes_and_loses_nothing(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI
):
    app, _ = discord_bot
    fake_llm.reply("first answer", delay=0.5).reply("second answer")
    first = fake_discord.dm("first question")
    await eventually(lambda: fake_llm.requests)  # the turn is in flight
    fake_discord.reconnect()
    second = fake_discord.dm("second question")  # sent while the bot reconnects: delivered or replayed
    await eventually(lambda: answered(fake_discord, first) and answered(fake_discord, second))

    assert fake_discord.ops.count(2) == 1 and fake_discord.ops.count(6) == 1  # one IDENTIFY, then RESUME
    assert fake_discord.resumes[0]["session_id"] == "fake-session-1"
    assert [p.content for p in fake_discord.posted_in(DM_CHANNEL)] == ["first answer", "second answer"]
    assert len(fake_llm.requests) == 2  # the second message was answered exactly once
    assert len(await rows(app, "SELECT id FROM sessions")) == 1


async def test_an_unauthorised_user_gets_a_polite_refusal_and_no_model_call(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI
):
    app, _ = discord_bot
    mid = fake_discord.mention("restart nginx", author=CAROL)
    await eventually(lambda: fake_discord.posted)
    [refusal] = fake_discord.posted
    assert refusal.channel == GENERAL and refusal.content.startswith("Sorry, you don't have access to me here.")
    assert refusal.body["message_reference"]["message_id"] == mid
    assert fake_llm.requests == [] and fake_discord.threads == {}
    assert await rows(app, "SELECT id FROM turns") == []


async def test_access_by_role_and_by_user_id_in_channels_and_dms(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI
):
    fake_llm.handler = lambda body: Step("reply", content="ok: " + body["messages"][-1]["content"])
    by_role = fake_discord.mention("as alice (on-call role)")
    by_user = fake_discord.mention("as bob (listed by ID)", author=BOB)
    dm_role = fake_discord.dm("alice in a DM: role looked up in the guild")
    dm_carol = fake_discord.dm("carol in a DM", author=CAROL)
    await eventually(lambda: all(answered(fake_discord, m) for m in (by_role, by_user, dm_role)))
    await eventually(lambda: len(fake_discord.posted_in(DM_CHANNEL)) == 2)
    assert [p.content for p in fake_discord.posted_in(by_role)] == ["ok: as alice (on-call role)"]
    assert [p.content for p in fake_discord.posted_in(by_user)] == ["ok: as bob (listed by ID)"]
    dms = {
        p.body["message_reference"]["message_id"] if "message_reference" in p.body else None: p.content
        for p in fake_discord.posted_in(DM_CHANNEL)
    }
    assert dms[None] == "ok: alice in a DM: role looked up in the guild"
    assert dms[dm_carol].startswith("Sorry, you don't have access to me here.")
    assert len(fake_llm.requests) == 3


async def test_model_output_cannot_ping_everyone(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI
):
    fake_llm.reply(f"@everyone the site is down! <@&{ONCALL_ROLE}> <@{BOB}>")
    mid = fake_discord.mention("is the site up?")
    await eventually(lambda: answered(fake_discord, mid))
    [posted] = fake_discord.posted_in(mid)
    assert posted.content.startswith("@\u2060everyone the site is down!")  # the text no longer pings…
    assert posted.body["allowed_mentions"] == {"parse": []}  # …and Discord is told to ping nobody


async def test_channels_route_to_their_agent_and_reply_inline_option(
    sqlite_url: str, fake_llm: FakeOpenAI, discord_agents: Path, fake_discord: FakeDiscord
):
    app, adapter = await start_bot(
        sqlite_url, fake_llm, discord_agents, fake_discord, discord_reply_inline=True
    )
    try:
        fake_llm.reply("from the other agent").reply("from ops")
        routed = fake_discord.mention("who answers here?", channel=OTHER)
        await eventually(lambda: answered(fake_discord, routed))
        default = fake_discord.mention("and here?", channel=GENERAL)
        await eventually(lambda: answered(fake_discord, default))
    finally:
        await adapter.stop()
    sessions = await rows(app, "SELECT channel, thread, agent FROM sessions ORDER BY created_at")
    await app.close()
    assert [(s.channel, s.thread, s.agent) for s in sessions] == [
        (str(OTHER), str(OTHER), "other"),
        (str(GENERAL), str(GENERAL), "ops"),
    ]
    assert fake_discord.threads == {}  # inline: answers go in the channel, as replies
    [inline] = fake_discord.posted_in(OTHER)
    assert (
        inline.content == "from the other agent" and inline.body["message_reference"]["message_id"] == routed
    )
    assert "You are a test agent." in fake_llm.requests[0]["messages"][0]["content"]


async def test_notify_posts_by_channel_id_or_name_and_explains_what_it_cannot(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord
):
    app, _ = discord_bot
    ref = await app.notifier.notify(f"discord:{OPS_ALERTS}", "disk 91% on web-1 @here")
    by_name = await app.notifier.notify("discord:#ops-alerts", "second alert")
    posted = fake_discord.posted_in(OPS_ALERTS)
    assert [p.content for p in posted] == ["disk 91% on web-1 @\u2060here", "second alert"]
    assert ref == f"discord:{OPS_ALERTS}/{posted[0].id}" and by_name == f"discord:{OPS_ALERTS}/{posted[1].id}"
    assert all(p.body["allowed_mentions"] == {"parse": []} for p in posted)
    with pytest.raises(ToolFailed, match="no text channel with that name"):
        await app.notifier.notify("discord:#no-such-channel", "x")
    with pytest.raises(ToolFailed, match="Discord answered 404"):
        await app.notifier.notify("discord:123456789", "x")


async def test_stop_lets_the_turn_in_flight_finish(
    sqlite_url: str, fake_llm: FakeOpenAI, discord_agents: Path, fake_discord: FakeDiscord
):
    app, adapter = await start_bot(sqlite_url, fake_llm, discord_agents, fake_discord)
    assert adapter.is_connected()  # /readyz
    fake_llm.reply("answered before shutdown", delay=0.5)
    mid = fake_discord.dm("slow question")
    await eventually(lambda: fake_llm.requests)
    await adapter.stop()
    assert not adapter.is_connected()
    await app.close()
    assert [p.content for p in fake_discord.posted_in(DM_CHANNEL)] == ["answered before shutdown"]
    assert fake_discord.reactions == [(DM_CHANNEL, mid, "✅")]


async def test_a_failed_turn_is_marked_and_explained(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI
):
    for _ in range(3):
        fake_llm.fail(500)
    mid = fake_discord.dm("hello")
    await eventually(lambda: answered(fake_discord, mid))
    [posted] = fake_discord.posted_in(DM_CHANNEL)
    assert posted.content.startswith("Sorry, I could not finish this")
    assert fake_discord.reactions == [(DM_CHANNEL, mid, "❌")]


async def test_a_bad_token_is_one_clear_error(
    sqlite_url: str, fake_llm: FakeOpenAI, discord_agents: Path, fake_discord: FakeDiscord
):
    fake_discord.token = "the-real-token-000000"
    with pytest.raises(ConfigError, match="Discord rejected DISCORD_BOT_TOKEN"):
        await start_bot(sqlite_url, fake_llm, discord_agents, fake_discord)


async def test_without_thread_permission_the_answer_comes_inline(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI
):
    fake_discord.forbid("POST", "/threads")
    fake_llm.reply("answered inline")
    mid = fake_discord.mention("status?")
    await eventually(lambda: answered(fake_discord, mid))
    [posted] = fake_discord.posted_in(GENERAL)
    assert posted.content == "answered inline" and posted.body["message_reference"]["message_id"] == mid


async def test_a_message_delivered_twice_is_answered_once(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI
):
    fake_llm.reply("once")
    mid = fake_discord.new_id()
    data = fake_discord.message_data(mid, DM_CHANNEL, "hello", guild=False)
    fake_discord.dispatch("MESSAGE_CREATE", data)
    fake_discord.dispatch("MESSAGE_CREATE", data)
    await eventually(lambda: answered(fake_discord, mid))
    await asyncio.sleep(0.1)
    assert [p.content for p in fake_discord.posted] == ["once"] and len(fake_llm.requests) == 1


async def test_two_instances_with_one_token_answer_a_message_once(
    db_url: str, fake_llm: FakeOpenAI, discord_agents: Path, fake_discord: FakeDiscord
):
    """Two `yokebot run` with the same token on one database both get every gateway event; one answers."""
    one = await start_bot(db_url, fake_llm, discord_agents, fake_discord)
    two = await start_bot(db_url, fake_llm, discord_agents, fake_discord)
    try:
        assert fake_discord.ops.count(2) == 2  # two gateway sessions (IDENTIFY twice)
        fake_llm.reply("only one of us", delay=0.2)
        mid = fake_discord.dm("hello both")  # MESSAGE_CREATE goes out on both connections

        def duplicates() -> float:
            return sum(app.metrics.value("yokebot_adapter_events_total", platform="discord", kind="duplicate")
                       for app, _ in (one, two))

        await eventually(lambda: answered(fake_discord, mid) and duplicates() == 1)
        await asyncio.sleep(0.1)
        claimed = await rows(one[0], "SELECT platform, event_key, state FROM inbox")
    finally:
        for app, adapter in (two, one):  # reverse order: each undoes its own discord.py redirect
            await adapter.stop()
            await app.close()
    assert [p.content for p in fake_discord.posted_in(DM_CHANNEL)] == ["only one of us"]
    assert fake_discord.reactions == [(DM_CHANNEL, mid, "✅")] and len(fake_llm.requests) == 1
    assert [(c.platform, c.event_key, c.state) for c in claimed] == [("discord", str(mid), "answered")]


async def test_notify_from_a_thread_of_the_target_channel_posts_into_that_thread(
    discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord
):
    """An alert's investigation runs in the thread opened on its root; its notify to the root's channel goes into
    that thread (a Discord thread is a channel of its own), not to the top of the channel."""
    from bot.engine.messages import Scope

    app, adapter = discord_bot
    root = await adapter.alert_threads().open(str(OPS_ALERTS), "🔴 disk full", "disk full")
    here = Scope("discord", root.channel, root.thread)
    in_thread = await app.notifier.notify("discord:#ops-alerts", "disk 99% on web-1", here)
    elsewhere = await app.notifier.notify("discord:#ops-alerts", "another alert", Scope("discord", "42", "43"))
    assert [p.content for p in fake_discord.posted_in(int(root.thread))] == ["disk 99% on web-1"]
    assert [p.content for p in fake_discord.posted_in(OPS_ALERTS)] == ["🔴 disk full", "another alert"]
    assert in_thread.startswith(f"discord:{root.thread}/") and elsewhere.startswith(f"discord:{OPS_ALERTS}/")
