"""Issue 13.2: the database goes away for a while (here 6 s; PostgreSQL behind a proxy the test cuts) while
turns run. Before: the write-behind queue gave up after 3 attempts 0.3 s apart, dropped the turns' rows
(their finishing update too), left them `running`, and told users "Sorry, something went wrong" although
the model had answered. Now the rows are held and written when the database is back, every user gets the
model's answer, and no turn is left `running`."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from bot.app import build_app
from bot.chat.core.pipeline import SORRY
from bot.runner import serve
from tests.chat.slack_harness import OPS, mention
from tests.chat.test_discord import TOKEN as DISCORD_TOKEN
from tests.conftest import make_settings
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, Step
from tests.fakes.slack_server import FakeSlack
from tests.fakes.tcp_proxy import TcpProxy
from tests.helpers import build_discord, db_rows, eventually, registry, write_agent
from tests.recovery.harness import free_port

TURNS = 8
OUTAGE_SECONDS = 6.0



@pytest.fixture
def proxied(pg_database: str):
    """(URL through the proxy, direct URL, the proxy)."""
    proxy = TcpProxy("127.0.0.1", 5432).start()
    host_part, dbname = pg_database.rsplit("/", 1)
    through = host_part.rsplit(":", 1)[0] + f":{proxy.port}/{dbname}"
    yield through, pg_database, proxy
    proxy.stop()


def slack_settings(db_url: str, fake_slack: FakeSlack, llm: FakeOpenAI, tmp: Path) -> Any:
    """Settings for `serve`: Slack over Socket Mode, the agent "ops", 30 s of database outage waited out."""
    agents = tmp / "agents"
    write_agent(agents, "ops", "description: ops\ntools: [current_time]")
    return make_settings(db_url, llm, agents, default_agent="ops", http_port=free_port(), http_host="127.0.0.1",
                         slack_api_url=fake_slack.api_url, scheduler_enabled=False,
                         slack_bot_token="xoxb-outage-test", slack_app_token="xapp-outage-test",
                         db_outage_seconds=30)


async def test_a_database_outage_during_turns_is_waited_out_and_every_answer_reaches_its_user(
        proxied: tuple[str, str, TcpProxy], fake_slack: FakeSlack, fake_llm: FakeOpenAI, tmp_path: Path,
        caplog: pytest.LogCaptureFixture):
    through, direct, proxy = proxied

    def answer(body: dict[str, Any]) -> Step:
        question = str(body["messages"][-1]["content"]).split("> ", 1)[-1]
        return Step("reply", content=f"answer: {question}", delay=1.5)

    fake_llm.handler = answer
    settings = slack_settings(through, fake_slack, fake_llm, tmp_path)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop))
    try:
        await eventually(lambda: fake_slack.connections >= 1, 20, "the Socket Mode connection")
        stamps = [fake_slack.next_ts() for _ in range(TURNS)]
        envelopes = [fake_slack.push(mention(f"question {i}", ts)) for i, ts in enumerate(stamps)]
        await eventually(lambda: all(e in fake_slack.acks for e in envelopes), 10, "the acks")
        await eventually(lambda: len(fake_llm.requests) >= TURNS, 10, "every turn at the model")
        with caplog.at_level(logging.WARNING, logger="bot.store.writer"):
            proxy.pause()  # the model answers while the database is away
            await asyncio.sleep(OUTAGE_SECONDS)
            assert all(fake_slack.posts(channel=OPS, thread_ts=ts) == [] for ts in stamps)  # still waiting
            proxy.resume()
            await eventually(lambda: all(fake_slack.posts(channel=OPS, thread_ts=ts) for ts in stamps), 30,
                             "an answer in every thread")
        assert proxy.refused > 0  # the outage was real: connections were refused
        for i, ts in enumerate(stamps):
            assert [c["text"] for c in fake_slack.posts(channel=OPS, thread_ts=ts)] == [f"answer: question {i}"]
        assert not any(SORRY in c["text"] for c in fake_slack.posts())
        assert "the database is unavailable" in caplog.text and "the database is back" in caplog.text
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=30)

    assert dict(await db_rows(direct, "SELECT status, count(*) FROM turns GROUP BY status")) == {"ok": TURNS}
    assert dict(await db_rows(direct, "SELECT state, count(*) FROM inbox GROUP BY state")) == {"answered": TURNS}
    [(calls,)] = await db_rows(direct, "SELECT count(*) FROM llm_calls WHERE error IS NULL")
    [(messages,)] = await db_rows(direct, "SELECT count(*) FROM messages")
    assert (calls, messages) == (TURNS, 2 * TURNS)


async def test_a_turn_that_starts_during_an_outage_waits_for_the_database_and_answers(
        proxied: tuple[str, str, TcpProxy], fake_slack: FakeSlack, fake_llm: FakeOpenAI, tmp_path: Path,
        caplog: pytest.LogCaptureFixture):
    """A mention claimed (and acknowledged) just before the database goes away, whose turn then needs it to
    start (its thread lock, its session): the turn waits for the database and answers, once, without an
    apology. Before, its user got "Sorry, something went wrong" and the message was closed as failed."""
    through, direct, proxy = proxied
    fake_llm.reply("all good")
    settings = slack_settings(through, fake_slack, fake_llm, tmp_path)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop))
    try:
        await eventually(lambda: fake_slack.connections >= 1, 20, "the Socket Mode connection")
        proxy.down_on(b"pg_try_advisory_lock")  # the thread lock: the first thing the turn asks the database
        ts = fake_slack.next_ts()
        envelope = fake_slack.push(mention("is the api up?", ts))
        await eventually(lambda: envelope in fake_slack.acks, 10, "the ack")
        with caplog.at_level(logging.INFO):
            await eventually(lambda: proxy.down, 10, "the outage, at the turn's start")
            await asyncio.sleep(3)
            assert fake_slack.posts(channel=OPS, thread_ts=ts) == [] and fake_llm.requests == []
            proxy.resume()
            await eventually(lambda: fake_slack.posts(channel=OPS, thread_ts=ts), 30, "the answer")
        assert [c["text"] for c in fake_slack.posts(channel=OPS, thread_ts=ts)] == ["all good"]
        assert not any(SORRY in c["text"] for c in fake_slack.posts())
        assert "starts its turn again" in caplog.text
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=30)

    assert len(fake_llm.requests) == 1
    assert await db_rows(direct, "SELECT status FROM turns") == [("ok",)]
    assert await db_rows(direct, "SELECT state, attempts FROM inbox") == [("answered", 1)]


async def test_a_discord_message_that_arrives_during_an_outage_is_claimed_when_the_database_is_back(
        proxied: tuple[str, str, TcpProxy], fake_discord: FakeDiscord, fake_llm: FakeOpenAI, tmp_path: Path):
    """Discord sends a message once, over the gateway, and never again: before, a message whose claim met a
    database outage was lost without a word. Now the claim waits for the database, and the message is answered
    once. (Slack sends an unacknowledged envelope again: there the claim fails at once, as before.)"""
    through, direct, proxy = proxied
    agents = tmp_path / "agents"
    write_agent(agents, "ops", "description: ops\ntools: [current_time]")
    fake_llm.reply("the disk is fine")
    settings = make_settings(through, fake_llm, agents, default_agent="ops", discord_bot_token=DISCORD_TOKEN,
                             discord_api_url=fake_discord.api_url, discord_gateway_url=fake_discord.gateway_url,
                             discord_guild_ready_timeout=0.05, progress_live=False, db_outage_seconds=30)
    app = await build_app(settings, registry=registry())
    adapter = build_discord(app)
    assert adapter is not None
    await adapter.start(within=10)
    try:
        proxy.down_on(b"INSERT INTO inbox")  # the claim is the statement that meets the outage
        mid = fake_discord.mention("how is the disk?")
        await eventually(lambda: proxy.down, 10, "the outage, at the claim")
        await asyncio.sleep(2)
        assert fake_discord.posted_in(mid) == [] and fake_llm.requests == []
        proxy.resume()
        await eventually(lambda: fake_discord.posted_in(mid), 30, "the answer")
        await asyncio.sleep(0.5)  # a second answer would have come by now
        assert [p.content for p in fake_discord.posted_in(mid)] == ["the disk is fine"]
    finally:
        await adapter.stop()
        await app.close()
    assert len(fake_llm.requests) == 1
    assert await db_rows(direct, "SELECT state FROM inbox") == [("answered",)]
