"""Discord messages on the durable inbox. Before, a Discord message was claimed in `processed_events` only:
`yokebot run` killed with SIGKILL while its turn ran, the message was never answered. Now each message
taken is stored with its claim (and settled `answered` after the reply); after a kill -9, the restarted
process (SQLite) or the lease's expiry (PostgreSQL) brings it back: answered once, in its thread or DM, or,
when a side-effecting tool had already run, the channel is told so instead of the alert going out twice."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from bot.app import App, build_app
from tests.chat.test_discord import TOKEN
from tests.conftest import make_settings, rows
from tests.fakes.discord_server import ALICE, DM_CHANNEL, GENERAL, OPS_ALERTS, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, Step, call
from tests.helpers import build_discord, db_rows, eventually, registry, write_agent
from tests.recovery.harness import Bot, free_port, killed_after_posting, wait_until
from tests.recovery.test_instances import readyz

OPS_AGENT = """
description: ops
max_iterations: 4
tools:
  notify: {}
  current_time: {}
notify:
  default: "discord:#ops-alerts"
  allowed: ["discord:#ops-alerts"]
"""
ALERT = "check the disk and alert the team"


def discord_settings(db_url: str, llm: FakeOpenAI, agents: Path, fake: FakeDiscord) -> Any:
    write_agent(agents, "ops", OPS_AGENT)
    return make_settings(db_url, llm, agents, default_agent="ops", discord_bot_token=TOKEN,
                         discord_api_url=fake.api_url, discord_gateway_url=fake.gateway_url,
                         discord_guild_ready_timeout=0.05, progress_live=False)


async def test_a_discord_message_is_claimed_in_the_inbox_and_settled_answered(
        db_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_discord: FakeDiscord):
    app: App = await build_app(discord_settings(db_url, fake_llm, agents_dir, fake_discord), registry=registry())
    adapter = build_discord(app)  # as `yokebot run` builds it
    assert adapter is not None
    await adapter.start(within=10)
    try:
        fake_llm.reply("all good", delay=0.3)
        mid = fake_discord.mention("how is the disk?")
        await eventually(lambda: fake_llm.requests, what="the turn at the model")
        # while the turn runs, the message is in the inbox (stored before the turn began), leased to this instance
        [during] = await rows(app, "SELECT state, lease_owner FROM inbox")
        assert during.state in ("claimed", "running") and during.lease_owner is not None
        await eventually(lambda: any(m == mid for _, m, _ in fake_discord.reactions), what="the answer")

        async def settled() -> list[Any]:
            found = await rows(app, "SELECT platform, event_key, channel, thread, \"user\", text, trigger, state, "
                                    "lease_owner FROM inbox")
            return found if found[0].state not in ("claimed", "running") else []

        stored = await eventually(settled, what="the inbox row settled after the reply")
    finally:
        await adapter.stop()
        await app.close()
    assert [p.content for p in fake_discord.posted_in(mid)] == ["all good"]  # in the thread on the message
    [row] = stored
    assert (row.platform, row.event_key, row.channel, row.thread, row.user, row.text, row.trigger) == \
        ("discord", str(mid), str(GENERAL), str(GENERAL), str(ALICE), "how is the disk?", "mention")
    assert row.state == "answered" and row.lease_owner is None


# --- kill -9 ---------------------------------------------------------------------------------------------


class SlowModel:
    """Answers each question by name; slowly until `fast`, so that turns are in flight at the kill. The alert
    question first calls notify (a side-effecting tool), then answers."""

    def __init__(self) -> None:
        self.fast = False

    def __call__(self, body: dict[str, Any]) -> Step:
        msgs = body["messages"]
        last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
        question = str(msgs[last_user]["content"])
        if ALERT in question and not any(m["role"] == "tool" for m in msgs[last_user:]):
            return Step("calls", calls=[call("notify", {"message": "disk /var is 99% full"})])
        return Step("reply", content=f"answer: {question}", delay=0.2 if self.fast else 30.0)


def discord_env(tmp: Path, db_url: str, fake: FakeDiscord, llm: FakeOpenAI) -> dict[str, str]:
    agents = tmp / "agents"
    write_agent(agents, "ops", OPS_AGENT)
    return {**os.environ, "YOKEBOT_DATABASE_URL": db_url, "YOKEBOT_AGENTS_DIR": str(agents),
            "YOKEBOT_DEFAULT_AGENT": "ops", "OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "sk-test-123456",
            "YOKEBOT_MODEL": "test-model", "YOKEBOT_MODEL_MAX_ATTEMPTS": "1", "DISCORD_BOT_TOKEN": TOKEN,
            "DISCORD_API_URL": fake.api_url, "DISCORD_GATEWAY_URL": fake.gateway_url,
            "YOKEBOT_DISCORD_GUILD_READY_TIMEOUT": "0.05", "YOKEBOT_HTTP_PORT": str(free_port()),
            "YOKEBOT_HTTP_HOST": "127.0.0.1", "YOKEBOT_SCHEDULER_ENABLED": "false",
            "YOKEBOT_INBOX_LEASE_SECONDS": "2", "YOKEBOT_LOG_LEVEL": "INFO", "YOKEBOT_PROGRESS_LIVE": "false"}


def contents(fake: FakeDiscord, channel: int) -> list[str]:
    return [p.content for p in fake.posted_in(channel)]


def test_kill9_then_restart_answers_each_discord_message_once_where_it_was_asked(
        tmp_path: Path, db_url: str, fake_discord: FakeDiscord, fake_llm: FakeOpenAI):
    model = SlowModel()
    fake_llm.handler = model
    env = discord_env(tmp_path, db_url, fake_discord, fake_llm)
    port = env["YOKEBOT_HTTP_PORT"]
    first = Bot(env, tmp_path, "first")
    try:
        wait_until(lambda: readyz(port) == 200, 30, "the gateway", first)
        in_channel = fake_discord.mention("how is host 1?")  # answered in a thread opened on it
        in_dm = fake_discord.dm("how is host 2?")
        alert = fake_discord.mention(ALERT)
        # every turn is in flight: both questions at the (slow) model, and the alert has been posted
        wait_until(lambda: len(fake_llm.requests) >= 4, 15, "the model requests", first)
        wait_until(lambda: len(fake_discord.posted_in(OPS_ALERTS)) == 1, 10, "the alert", first)
        # the turns' rows are committed within the write-behind queue's 25 ms linger: the kill comes after
        wait_until(lambda: asyncio.run(db_rows(db_url, "SELECT count(*) FROM turns"))[0][0] >= 3, 10,
                   "every turn's row", first)
    finally:
        first.kill9()
    assert in_channel in fake_discord.threads  # the first attempt opened the thread
    assert [p for p in fake_discord.posted if p.channel != OPS_ALERTS] == []  # nobody has an answer yet

    model.fast = True
    second = Bot(env, tmp_path, "second")
    try:
        wait_until(lambda: contents(fake_discord, in_channel) and contents(fake_discord, DM_CHANNEL)
                   and contents(fake_discord, GENERAL), 20, "a reply to every message", second)
        asyncio.run(asyncio.sleep(1.0))  # nothing else comes
        assert contents(fake_discord, in_channel) == ["answer: how is host 1?"]  # in the thread it had opened
        assert contents(fake_discord, DM_CHANNEL) == ["answer: how is host 2?"]
        [note] = fake_discord.posted_in(GENERAL)  # a reply to the alert question, in its channel
        assert "restarted" in note.content and "`notify`" in note.content and "not done twice" in note.content
        assert int(note.body["message_reference"]["message_id"]) == alert
        assert len(fake_discord.posted_in(OPS_ALERTS)) == 1  # the alert was not posted again
        assert sorted(fake_discord.threads) == sorted([in_channel, alert])  # no second thread on a message
        assert sorted(fake_discord.reactions) == sorted([(GENERAL, in_channel, "✅"), (DM_CHANNEL, in_dm, "✅"),
                                                         (GENERAL, alert, "❌")])
    finally:
        assert second.stop() == 0, second.output()[-3000:]

    inbox = asyncio.run(db_rows(db_url, "SELECT event_key, state FROM inbox WHERE platform = 'discord'"))
    assert dict(inbox) == {str(in_channel): "answered", str(in_dm): "answered", str(alert): "interrupted"}
    turns = asyncio.run(db_rows(db_url, "SELECT stopped_by, count(*) FROM turns GROUP BY stopped_by"))
    assert dict(turns) == {"interrupted": 3, "answer": 2}
    sessions = asyncio.run(db_rows(db_url, "SELECT channel, thread FROM sessions WHERE platform = 'discord'"))
    assert (str(GENERAL), str(in_channel)) in sessions  # the rerun answered in the thread's session


def test_killed_after_posting_its_answer_the_restart_finds_it_in_the_thread_and_does_not_answer_again(
        tmp_path: Path, db_url: str, fake_discord: FakeDiscord, fake_llm: FakeOpenAI):
    """As on Slack (tests/recovery/test_answered_at_once.py): the answer is in the thread opened on the message,
    but Discord's reply to that post had not reached the bot when it was killed; the instance that takes the row
    over reads the thread and closes the row instead of answering a second time."""
    fake_llm.handler = lambda _body: Step("reply", content="host 1 is fine: load 0.3")
    env = discord_env(tmp_path, db_url, fake_discord, fake_llm)
    asked, inbox = killed_after_posting(env, tmp_path, db_url, fake_discord,
                                        lambda: fake_discord.mention("how is host 1?"),
                                        lambda asked: contents(fake_discord, asked), "the gateway", 30)
    assert contents(fake_discord, asked) == ["host 1 is fine: load 0.3"]
    assert inbox == [("answered", "answered before the restart, not answered again")]
    assert len(fake_llm.requests) == 1
