"""Mattermost on the durable inbox, as real `yokebot run` processes: killed with SIGKILL mid-turn and started
again, each post is answered once where it was asked (a side-effecting tool that had run is not run again: the
thread is told); and two instances connected at once (both receive every `posted` event) answer each post
once, the post's ID being the claim."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from tests.fakes.mattermost import DM, OPS_ALERTS, TOKEN, TOWN, FakeMattermost
from tests.fakes.openai_server import FakeOpenAI, Step
from tests.helpers import db_rows, write_agent
from tests.recovery.harness import OPS_AGENT as HARNESS_AGENT
from tests.recovery.harness import Bot, free_port, killed_after_posting, wait_until
from tests.recovery.test_discord_inbox import ALERT, SlowModel
from tests.recovery.test_instances import readyz

OPS_AGENT = HARNESS_AGENT.replace("slack:#ops-alerts", "mattermost:#ops-alerts")  # alerts to Mattermost


def mattermost_env(tmp: Path, db_url: str, fake: FakeMattermost, llm: FakeOpenAI) -> dict[str, str]:
    agents = tmp / "agents"
    write_agent(agents, "ops", OPS_AGENT)
    return {**os.environ, "YOKEBOT_DATABASE_URL": db_url, "YOKEBOT_AGENTS_DIR": str(agents),
            "YOKEBOT_DEFAULT_AGENT": "ops", "OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "sk-test-123456",
            "YOKEBOT_MODEL": "test-model", "YOKEBOT_MODEL_MAX_ATTEMPTS": "1", "MATTERMOST_URL": fake.url,
            "MATTERMOST_BOT_TOKEN": TOKEN, "YOKEBOT_HTTP_PORT": str(free_port()), "YOKEBOT_HTTP_HOST": "127.0.0.1",
            "YOKEBOT_SCHEDULER_ENABLED": "false", "YOKEBOT_INBOX_LEASE_SECONDS": "2", "YOKEBOT_LOG_LEVEL": "INFO",
            "YOKEBOT_PROGRESS_LIVE": "false"}


def test_kill9_then_restart_answers_each_mattermost_post_once_where_it_was_asked(
        tmp_path: Path, db_url: str, fake_mattermost: FakeMattermost, fake_llm: FakeOpenAI):
    fake = fake_mattermost
    model = SlowModel()
    fake_llm.handler = model
    env = mattermost_env(tmp_path, db_url, fake, fake_llm)
    first = Bot(env, tmp_path, "first")
    try:
        wait_until(lambda: readyz(env["YOKEBOT_HTTP_PORT"]) == 200, 60, "the WebSocket", first)
        in_channel = fake.mention("how is host 1?")
        in_dm = fake.dm("how is host 2?")
        alert = fake.mention(ALERT)
        wait_until(lambda: len(fake_llm.requests) >= 4, 15, "the model requests", first)
        wait_until(lambda: len(fake.messages(OPS_ALERTS)) == 1, 10, "the alert", first)
        wait_until(lambda: asyncio.run(db_rows(db_url, "SELECT count(*) FROM turns"))[0][0] >= 3, 10,
                   "every turn's row", first)
    finally:
        first.kill9()
    assert [p for p in fake.bot_posts() if p["channel_id"] != OPS_ALERTS] == []  # nobody has an answer yet

    model.fast = True
    second = Bot(env, tmp_path, "second")
    try:
        wait_until(lambda: fake.messages(TOWN, root=in_channel) and fake.messages(DM)
                   and fake.messages(TOWN, root=alert), 60, "a reply to every post", second)
        asyncio.run(asyncio.sleep(1.0))  # nothing else comes (the catch-up at start reads these posts again)
        assert fake.messages(TOWN, root=in_channel) == ["answer: how is host 1?"]  # in the mention's thread
        assert fake.messages(DM) == ["answer: how is host 2?"]
        [note] = fake.messages(TOWN, root=alert)
        assert "restarted" in note and "`notify`" in note and "not done twice" in note
        assert len(fake.messages(OPS_ALERTS)) == 1  # the alert was not posted again
        assert ("+", in_channel, "white_check_mark") in fake.reactions and ("+", alert, "x") in fake.reactions
    finally:
        assert second.stop() == 0, second.output()[-3000:]
    inbox = asyncio.run(db_rows(db_url, "SELECT event_key, state FROM inbox WHERE platform = 'mattermost'"))
    assert dict(inbox) == {in_channel: "answered", in_dm: "answered", alert: "interrupted"}


def test_two_instances_answer_each_post_once(
        tmp_path: Path, pg_database: str, fake_mattermost: FakeMattermost, fake_llm: FakeOpenAI):
    fake = fake_mattermost
    fake_llm.handler = lambda body: Step("reply", content="answer: " + str(
        [m for m in body["messages"] if m["role"] == "user"][-1]["content"]), delay=0.1)
    env = mattermost_env(tmp_path, pg_database, fake, fake_llm)
    envs = [env, {**env, "YOKEBOT_HTTP_PORT": str(free_port())}]
    bots = [Bot(e, tmp_path, f"bot{n}") for n, e in enumerate(envs)]
    try:
        for bot, e in zip(bots, envs, strict=True):
            wait_until(lambda e=e: readyz(e["YOKEBOT_HTTP_PORT"]) == 200, 60, "both connected", bot)
        wait_until(lambda: fake.connects == 2, 10, "two WebSocket connections")
        asked = [fake.mention(f"question {n}") for n in range(6)]
        wait_until(lambda: all(fake.messages(TOWN, root=a) for a in asked), 30, "every answer", bots[0])
        asyncio.run(asyncio.sleep(1.0))
    finally:
        codes = [bot.stop() for bot in bots]
    assert codes == [0, 0], "".join(bot.output()[-2000:] for bot in bots)
    for n, a in enumerate(asked):
        assert fake.messages(TOWN, root=a) == [f"answer: question {n}"], "".join(b.output() for b in bots)
    assert len(fake_llm.requests) == 6  # each post one turn, on one instance or the other
    inbox = asyncio.run(db_rows(pg_database, "SELECT event_key, state FROM inbox WHERE platform = 'mattermost'"))
    assert sorted(inbox) == sorted((a, "answered") for a in asked)


def test_killed_after_posting_its_answer_the_restart_finds_it_in_the_thread_and_does_not_answer_again(
        tmp_path: Path, db_url: str, fake_mattermost: FakeMattermost, fake_llm: FakeOpenAI):
    """As on Slack and Discord: the answer is in the mention's thread, but Mattermost's reply to that post had
    not reached the bot when it was killed; the instance that takes the row over reads the thread and closes
    the row instead of answering a second time."""
    fake = fake_mattermost
    fake_llm.handler = lambda _body: Step("reply", content="host 1 is fine: load 0.3")
    env = mattermost_env(tmp_path, db_url, fake, fake_llm)
    asked, inbox = killed_after_posting(env, tmp_path, db_url, fake, lambda: fake.mention("how is host 1?"),
                                        lambda asked: fake.messages(TOWN, root=asked), "the WebSocket", 60)
    assert fake.messages(TOWN, root=asked) == ["host 1 is fine: load 0.3"]
    assert inbox == [("answered", "answered before the restart, not answered again")]
    assert len(fake_llm.requests) == 1
