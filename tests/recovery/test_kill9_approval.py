"""Issue 25: `yokebot run` killed with SIGKILL while an approval is pending, started again, then the approver
clicks Approve. Before, the click was recorded but nothing waited on it (the restart had re-run the turn from
scratch, which posted a second request). Now the turn was parked on its inbox row: the restart takes nothing
over and posts nothing, the click resumes the turn from its stored state, the call runs once and the thread
gets one answer. On SQLite and PostgreSQL, real processes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bot.approvals.desk import ACTION_APPROVE
from tests.chat.slack_harness import OPS, mention
from tests.fakes.openai_server import FakeOpenAI, Step, call
from tests.fakes.slack_server import FakeSlack, block_actions
from tests.helpers import db_rows, write_agent
from tests.recovery.harness import Bot, run_env, wait_until

BOSS = "U_BOSS"
ALERT = "the disk is full, alert the team"
GATED_OPS = """
description: ops
max_iterations: 4
tools:
  notify:
    approval: {approvers: [U_BOSS], timeout: 5m}
notify:
  default: "slack:#ops-alerts"
  allowed: ["slack:#ops-alerts"]
"""


class AlertModel:
    """Asks to notify the team (a gated, side-effecting call), then answers with what came of it."""

    def __call__(self, body: dict[str, Any]) -> Step:
        msgs = body["messages"]
        last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
        results = [m for m in msgs[last_user:] if m["role"] == "tool"]
        if not results:
            return Step("calls", calls=[call("notify", {"message": "disk /var is 99% full"}, "call_alert")])
        return Step("reply", content=f"Alert: {results[-1]['content']}")


def requests(slack: FakeSlack) -> list[Any]:
    def actions(c: Any) -> bool:
        blocks = c.params.get("blocks") or []
        return any(b.get("type") == "actions" for b in (blocks if isinstance(blocks, list) else []))

    return [c for c in slack.calls_to("chat.postMessage") if actions(c)]


def answers(slack: FakeSlack, ts: str) -> list[str]:
    shown = {id(c) for c in requests(slack)}
    return [str(c.params.get("text")) for c in slack.posts(channel=OPS, thread_ts=ts) if id(c) not in shown]


def rows_of(db_url: str, sql: str) -> list[Any]:
    return asyncio.run(db_rows(db_url, sql))


def parked_then_killed(tmp_path: Path, db_url: str, fake_slack: FakeSlack,
                       fake_llm: FakeOpenAI) -> tuple[dict[str, str], str]:
    """A first `yokebot run` whose turn asked for an approval and parked, then SIGKILL: (its env, the thread)."""
    fake_llm.handler = AlertModel()
    env = run_env(tmp_path, db_url, fake_slack, fake_llm)
    write_agent(tmp_path / "agents", "ops", GATED_OPS)
    first = Bot(env, tmp_path, "first")
    try:
        wait_until(lambda: fake_slack.connections >= 1, 20, "the Socket Mode connection", first)
        ts = fake_slack.next_ts()
        envelope = fake_slack.push(mention(ALERT, ts))
        wait_until(lambda: envelope in fake_slack.acks, 10, "the ack", first)
        wait_until(lambda: len(requests(fake_slack)) == 1, 15, "the approval request", first)
        wait_until(lambda: rows_of(db_url, "SELECT state FROM inbox") == [("parked",)], 15, "the turn parked",
                   first)
    finally:
        first.kill9()
    return env, ts


def test_kill9_while_an_approval_waits_then_approve_after_the_restart_runs_the_call_once(
        tmp_path: Path, db_url: str, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    env, ts = parked_then_killed(tmp_path, db_url, fake_slack, fake_llm)
    [request] = requests(fake_slack)
    assert request.params["thread_ts"] == ts and len(fake_llm.requests) == 1

    fake_slack.connections = 0
    second = Bot(env, tmp_path, "second")
    try:
        # connected only after recovery's first sweep: a turn re-run from scratch would be asking the model now
        wait_until(lambda: fake_slack.connections >= 1, 20, "the Socket Mode connection", second)
        assert rows_of(db_url, "SELECT state, lease_owner FROM inbox") == [("parked", None)]
        [(approval_id,)] = rows_of(db_url, "SELECT id FROM approvals")
        fake_slack.push_interactive(block_actions(BOSS, ACTION_APPROVE, str(approval_id), OPS,
                                                  request.result["ts"], ts))
        wait_until(lambda: answers(fake_slack, ts), 20, "the answer in the thread", second)
        wait_until(lambda: rows_of(db_url, "SELECT state FROM inbox") == [("answered",)], 10, "the row settled",
                   second)
    finally:
        assert second.stop() == 0, second.output()[-3000:]

    [answer] = answers(fake_slack, ts)  # one answer, from the resumed turn
    assert answer.startswith("Alert:") and "restarted" not in answer
    assert len(fake_slack.posts(channel="C_OPS_ALERTS")) == 1  # the approved call ran once
    assert len(requests(fake_slack)) == 1  # no second request for the same call
    assert len(fake_llm.requests) == 2  # resumed from its state: the model was not asked from scratch
    assert rows_of(db_url, "SELECT status, decided_by, outcome FROM approvals") == [("approved", BOSS, "ran")]
    assert rows_of(db_url, "SELECT status, stopped_by FROM turns") == [("ok", "answer")]  # one turn, resumed
    assert rows_of(db_url, "SELECT tool, status, reason FROM tool_invocations") == [
        ("notify", "ok", "approved by U_BOSS")]


def test_kill9_after_the_request_was_posted_and_before_the_turn_parked_posts_no_second_request(
        tmp_path: Path, db_url: str, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    """The milliseconds between posting the request and storing the parked state: the turn's inbox row is
    still `running`, with no state to resume from, so the restart runs its message again and the model asks
    for the same call. Before, that posted a second request (the first one dead: its turn gone). Now the
    request already in the thread is this turn's: no second one, and a click on it runs the call once. The
    database is left as that kill leaves it: the first process parked, was killed, and its row is put back
    to `running` with an expired lease and no parked state."""
    env, ts = parked_then_killed(tmp_path, db_url, fake_slack, fake_llm)
    [(cut_turn,)] = rows_of(db_url, "UPDATE inbox SET state = 'running', parked = NULL, parked_at = NULL, "
                                    "lease_owner = 'the-killed-one', lease_until = CURRENT_TIMESTAMP "
                                    "RETURNING turn_id")
    [request] = requests(fake_slack)

    fake_slack.connections = 0
    second = Bot(env, tmp_path, "second")
    try:
        wait_until(lambda: rows_of(db_url, "SELECT state FROM inbox") == [("parked",)], 30,
                   "the message run again, parked on the same request", second)
        [(approval_id, turn_id, status)] = rows_of(db_url, "SELECT id, turn_id, status FROM approvals")
        assert turn_id != cut_turn and status == "pending"
        assert len(requests(fake_slack)) == 1  # no second request
        wait_until(lambda: fake_slack.connections >= 1, 20, "the Socket Mode connection", second)
        fake_slack.push_interactive(block_actions(BOSS, ACTION_APPROVE, str(approval_id), OPS,
                                                  request.result["ts"], ts))
        wait_until(lambda: answers(fake_slack, ts), 20, "the answer in the thread", second)
    finally:
        assert second.stop() == 0, second.output()[-3000:]
    [answer] = answers(fake_slack, ts)
    assert answer.startswith("Alert:")
    assert len(fake_slack.posts(channel="C_OPS_ALERTS")) == 1  # the approved call ran once
    assert len(requests(fake_slack)) == 1
    assert rows_of(db_url, "SELECT status, decided_by, outcome FROM approvals") == [("approved", BOSS, "ran")]
