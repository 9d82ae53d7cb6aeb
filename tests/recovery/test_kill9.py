"""Issue 13.1: `yokebot run` killed with SIGKILL while turns run, then started again. Before the inbox, the
acknowledged messages were never answered and their turns stayed `running` forever. Now every acked
message gets exactly one reply: the answer (its turn is run again) or, when a side-effecting tool had
already run, a plain note that the bot was restarted; nothing is left `running`; a redelivery by Slack is
not answered twice. On SQLite (the restarted process owns the file, so it takes everything over at once)
and on PostgreSQL (leases run out; YOKEBOT_INBOX_LEASE_SECONDS=2), direct and through PgBouncer in transaction
pooling (issue 44)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.cli import app
from tests.chat.slack_harness import OPS, mention
from tests.fakes.openai_server import FakeOpenAI, Step, call
from tests.fakes.slack_server import FakeSlack
from tests.helpers import db_rows
from tests.recovery.harness import Bot, run_env, wait_until

QUESTIONS = [f"how is host {i}?" for i in range(5)]
ALERT = "check the disk and alert the team"


class SlowModel:
    """Answers each question by name; slowly until `fast`, so that turns are in flight at the kill. The
    alert question first calls notify (a side-effecting tool), then answers."""

    def __init__(self) -> None:
        self.fast = False

    def __call__(self, body: dict[str, Any]) -> Step:
        msgs = body["messages"]
        last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
        question = str(msgs[last_user]["content"])
        after_tool = any(m["role"] == "tool" for m in msgs[last_user:])
        delay = 0.2 if self.fast else 30.0
        if ALERT in question and not after_tool:
            return Step("calls", calls=[call("notify", {"message": "disk /var is 99% full"})])
        return Step("reply", content=f"answer: {question.split('> ', 1)[-1]}", delay=delay)



@pytest.fixture
def db_url(db_url_via_transaction_pooling: str) -> str:
    """SQLite, PostgreSQL, and PostgreSQL through PgBouncer in transaction pooling."""
    return db_url_via_transaction_pooling


def replies(slack: FakeSlack, ts: str) -> list[str]:
    return [c["text"] for c in slack.posts(channel=OPS, thread_ts=ts)]


def test_kill9_with_turns_in_flight_then_restart_answers_every_acked_message_once(
        tmp_path: Path, db_url: str, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    model = SlowModel()
    fake_llm.handler = model
    env = run_env(tmp_path, db_url, fake_slack, fake_llm)
    first = Bot(env, tmp_path, "first")
    try:
        wait_until(lambda: fake_slack.connections >= 1, 20, "the Socket Mode connection", first)
        stamps = [fake_slack.next_ts() for _ in range(len(QUESTIONS) + 1)]
        payloads = [mention(q, ts) for q, ts in zip([*QUESTIONS, ALERT], stamps, strict=True)]
        envelopes = [fake_slack.push(p) for p in payloads]
        wait_until(lambda: all(e in fake_slack.acks for e in envelopes), 10, "the acks", first)
        # every turn is in flight: each question is at the (slow) model, and the alert has been posted
        wait_until(lambda: len(fake_llm.requests) >= len(QUESTIONS) + 2, 15, "the model requests", first)
        wait_until(lambda: len(fake_slack.posts(channel="C_OPS_ALERTS")) == 1, 10, "the alert", first)
        # the turns' rows go through the write-behind queue (committed within its 25 ms linger): the kill
        # comes once every one is there, so each cut turn has a row to be marked interrupted
        wait_until(lambda: asyncio.run(db_rows(db_url, "SELECT count(*) FROM turns"))[0][0] >= len(stamps), 10,
                   "every turn's row", first)
    finally:
        first.kill9()
    assert all(replies(fake_slack, ts) == [] for ts in stamps)  # nobody has an answer yet

    model.fast = True
    fake_slack.connections = 0
    second = Bot(env, tmp_path, "second")
    try:
        wait_until(lambda: all(replies(fake_slack, ts) for ts in stamps), 20, "a reply to every message", second)
        wait_until(lambda: fake_slack.connections >= 1, 10, "the Socket Mode connection", second)
        # Slack redelivers one of them (it may, after an outage): acknowledged, not answered again
        again = fake_slack.push(payloads[0], retry_attempt=1, retry_reason="timeout")
        wait_until(lambda: again in fake_slack.acks, 10, "the ack of the redelivery", second)
        asyncio.run(asyncio.sleep(1.0))
        for question, ts in zip(QUESTIONS, stamps, strict=False):
            assert replies(fake_slack, ts) == [f"answer: {question}"]
        [note] = replies(fake_slack, stamps[-1])
        assert "restarted" in note and "`notify`" in note and "not done twice" in note
        assert len(fake_slack.posts(channel="C_OPS_ALERTS")) == 1  # the alert was not posted again
    finally:
        assert second.stop() == 0, second.output()[-3000:]

    statuses = asyncio.run(db_rows(db_url, "SELECT stopped_by, count(*) FROM turns GROUP BY stopped_by "
                                           "ORDER BY stopped_by"))
    detail = (asyncio.run(db_rows(db_url, "SELECT id, status, text, started_at FROM turns ORDER BY started_at")),
              asyncio.run(db_rows(db_url, "SELECT id, state, turn_id, attempts, effects FROM inbox")))
    assert dict(statuses) == {"interrupted": len(QUESTIONS) + 1, "answer": len(QUESTIONS)}, detail
    inbox = asyncio.run(db_rows(db_url, "SELECT state, count(*) FROM inbox GROUP BY state ORDER BY state"))
    assert dict(inbox) == {"answered": len(QUESTIONS), "interrupted": 1}
    # `yokebot trace` shows the cut attempt as interrupted, then the answer
    [(session,)] = asyncio.run(db_rows(db_url, f"SELECT session_id FROM turns WHERE text LIKE '%{QUESTIONS[0]}'"
                                               " AND status = 'ok'"))
    trace = CliRunner().invoke(app, ["trace", session], env={**env, "COLUMNS": "220", "NO_COLOR": "1"})
    assert trace.exit_code == 0, trace.output
    assert "interrupted: yokebot was restarted during this turn" in trace.stdout
    assert f"answer: answer: {QUESTIONS[0]}" in trace.stdout
    # the interrupted attempts left no half turn in the history: one question, one answer per session
    history = asyncio.run(db_rows(db_url, "SELECT session_id, count(*) FROM messages WHERE role = 'user' "
                                          "GROUP BY session_id"))
    assert {n for _, n in history} == {1}


def test_a_second_run_on_the_same_sqlite_file_is_refused(tmp_path: Path, sqlite_url: str, fake_slack: FakeSlack,
                                                         fake_llm: FakeOpenAI):
    env = run_env(tmp_path, sqlite_url, fake_slack, fake_llm)
    first = Bot(env, tmp_path, "first")
    try:
        wait_until(lambda: fake_slack.connections >= 1, 20, "the first bot", first)
        second = Bot({**env, "YOKEBOT_HTTP_PORT": "0"}, tmp_path, "second")
        assert second.proc.wait(timeout=20) == 1
        assert "Another `yokebot run`" in second.output() and "PostgreSQL" in second.output()
        assert first.proc.poll() is None
        assert "http on 127.0.0.1:" in first.output()  # YOKEBOT_HTTP_HOST
    finally:
        assert first.stop() == 0


IN_FLIGHT = 8
LONG_LEASE = "60"  # far longer than a restart takes: the leases of the killed process are not waited out


def test_a_restart_on_the_same_host_takes_over_the_killed_process_turns_at_once(
        tmp_path: Path, db_url: str, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    """Issue 25: the restarted process sees its predecessor is gone (same host and boot, its pid gone or
    another process's) and takes its inbox leases at once; before, on PostgreSQL it waited the lease out."""
    model = SlowModel()
    fake_llm.handler = model
    env = run_env(tmp_path, db_url, fake_slack, fake_llm, YOKEBOT_INBOX_LEASE_SECONDS=LONG_LEASE)
    first = Bot(env, tmp_path, "first")
    try:
        wait_until(lambda: fake_slack.connections >= 1, 20, "the Socket Mode connection", first)
        stamps = [fake_slack.next_ts() for _ in range(IN_FLIGHT)]
        envelopes = [fake_slack.push(mention(f"how is host {i}?", ts)) for i, ts in enumerate(stamps)]
        wait_until(lambda: all(e in fake_slack.acks for e in envelopes), 10, "the acks", first)
        wait_until(lambda: len(fake_llm.requests) >= IN_FLIGHT, 15, "every turn at the model", first)
    finally:
        first.kill9()
    model.fast = True
    second = Bot(env, tmp_path, "second")
    began = time.monotonic()
    try:
        wait_until(lambda: all(replies(fake_slack, ts) for ts in stamps), 90, "a reply to every message", second)
        took = time.monotonic() - began
        print(f"took over and answered {IN_FLIGHT} cut turns {took:.1f} s after the restart")
        assert took < 20, f"{took:.1f} s: the killed process's leases ({LONG_LEASE} s) were waited out"
        for i, ts in enumerate(stamps):
            assert replies(fake_slack, ts) == [f"answer: how is host {i}?"]
    finally:
        assert second.stop() == 0, second.output()[-3000:]
    inbox = asyncio.run(db_rows(db_url, "SELECT state, count(*) FROM inbox GROUP BY state"))
    assert dict(inbox) == {"answered": IN_FLIGHT}
    running = asyncio.run(db_rows(db_url, "SELECT count(*) FROM turns WHERE status = 'running'"))
    assert running == [(0,)]
