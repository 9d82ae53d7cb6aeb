"""Channel messages and mentions go straight to the adapter, past Bolt's middleware (bot/chat/slack/direct.py):
what Bolt did for them still holds, on both transports: a forged or stale request is refused, an event that
cannot be stored is not acknowledged (Slack delivers it again, nothing is lost), and the bot's own messages
and DMs are handled as before."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.chat.slack_harness import mention, start_bot
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import BOT_USER, FakeSlack, event_callback
from tests.helpers import eventually


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_an_event_that_cannot_be_stored_is_not_acknowledged_and_its_redelivery_is_answered(
        fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path, mode: str,
        caplog: pytest.LogCaptureFixture):
    fake_llm.reply("Here.")
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents, mode=mode)
    try:
        async with bot.app.engine.begin() as conn:  # the inbox cannot take it: as if the disk failed
            await conn.execute(text("ALTER TABLE inbox RENAME TO inbox_away"))
        event = mention("are you there?", ts="1800.000100")
        if mode == "socket":
            envelope = fake_slack.push(event)
            await eventually(lambda: "could not be taken" in caplog.text, what="the event refused")
        else:
            status, _ = await bot.post(event)
            assert status == 500  # Slack retries it
        async with bot.app.engine.begin() as conn:
            await conn.execute(text("ALTER TABLE inbox_away RENAME TO inbox"))
        if mode == "socket":
            assert envelope not in fake_slack.acks
        assert fake_llm.requests == []
        await bot.deliver(event, retry=1)  # Slack's redelivery
        await eventually(lambda: any("Here." in str(p.params.get("text")) for p in fake_slack.posts()),
                         what="the answer")
        assert len(fake_llm.requests) == 1
    finally:
        await bot.stop()


async def test_a_stale_or_unsigned_mention_is_refused_without_a_turn(
        fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path):
    fake_llm.reply("Not restarting anything.")
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents, mode="http")
    try:
        event = mention("restart everything", ts="1800.000200")
        assert (await bot.post(event, timestamp=int(time.time()) - 600))[0] == 401  # a replay, 10 min old
        assert (await bot.post(event, secret="not-the-secret"))[0] == 401
        assert (await bot.post(event))[0] == 200
        await eventually(lambda: len(fake_llm.requests) == 1, what="the one real request's turn")
    finally:
        await bot.stop()


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_the_bots_own_message_and_a_dm_are_handled_as_before(
        fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path, mode: str):
    fake_llm.reply("Hello in private.")
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents, mode=mode)
    try:
        own = {"type": "message", "user": BOT_USER, "text": f"<@{BOT_USER}> echo", "ts": "1800.000300",
               "channel": "C_OPS", "channel_type": "channel", "thread_ts": "1800.000001"}
        await bot.deliver(event_callback(own, "EvOWN1"))
        dm = {"type": "message", "user": "U_ALICE", "text": "hi", "ts": "1800.000400", "channel": "D_ALICE",
              "channel_type": "im"}
        await bot.deliver(event_callback(dm, "EvDM1"))  # a DM goes through Bolt (it may be an assistant thread)
        await eventually(lambda: any("Hello in private." in str(p.params.get("text"))
                                     for p in fake_slack.posts(channel="D_ALICE")), what="the DM's answer")
        assert len(fake_llm.requests) == 1  # the bot's own message started nothing
        if mode == "socket":
            await bot.wait_acked(2)
        else:
            assert bot.http_statuses == [200, 200]
    finally:
        await bot.stop()

