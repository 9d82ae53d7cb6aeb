"""`yokebot run` killed with SIGKILL while a sub-agent's side effect has happened (its notify posted, the tree
still running): the restart does not run the tree again (no second alert), the thread is told which tool had
run, and nothing is left `running`. On SQLite and PostgreSQL (docs/delegation.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.chat.slack_harness import OPS, mention
from tests.fakes.openai_server import FakeOpenAI, Step, call
from tests.fakes.slack_server import FakeSlack
from tests.helpers import db_rows, write_agent
from tests.recovery.harness import Bot, run_env, wait_until

QUESTION = "the disk is filling up, check it and warn the team"


class TreeModel:
    """The lead hands the alert to its `alerter` sub-agent, which notifies, then (slowly, until `fast`) says so."""

    def __init__(self) -> None:
        self.fast = False
        self.lead_calls = 0

    def __call__(self, body: dict[str, Any]) -> Step:
        msgs = body["messages"]
        after_tool = any(m["role"] == "tool" for m in msgs)
        if "You are the alerter" in msgs[0]["content"]:
            if not after_tool:
                return Step("calls", calls=[call("notify", {"message": "disk /var is 99% full"})])
            return Step("reply", content="alerted #ops-alerts", delay=0.1 if self.fast else 30.0)
        self.lead_calls += 1
        if not after_tool:
            return Step("calls", calls=[call("delegate", {"agent": "alerter", "task": "Warn the team: /var is full."})])
        return Step("reply", content="I warned the team.")


def test_kill9_after_a_sub_agents_notify_never_runs_the_tree_again(
        tmp_path: Path, db_url: str, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    model = TreeModel()
    fake_llm.handler = model
    env = run_env(tmp_path, db_url, fake_slack, fake_llm)
    agents = tmp_path / "agents"
    write_agent(agents, "ops", "description: ops\ntools: [current_time]\ndelegate: [alerter]\nmax_iterations: 4",
                body="You are the lead.")
    write_agent(agents, "alerter", "description: warns the team\ntools: [notify]\nmax_iterations: 3\n"
                "notify:\n  default: \"slack:#ops-alerts\"\n  allowed: [\"slack:#ops-alerts\"]",
                body="You are the alerter.")
    first = Bot(env, tmp_path, "first")
    ts = fake_slack.next_ts()
    try:
        wait_until(lambda: fake_slack.connections >= 1, 20, "the Socket Mode connection", first)
        envelope = fake_slack.push(mention(QUESTION, ts))
        wait_until(lambda: envelope in fake_slack.acks, 10, "the ack", first)
        wait_until(lambda: len(fake_slack.posts(channel="C_OPS_ALERTS")) == 1, 15, "the sub-agent's alert", first)
        # the inbox row names the effect (committed before notify ran); the child's row is in too
        wait_until(lambda: asyncio.run(db_rows(db_url, "SELECT effects FROM inbox"))[0][0], 10, "the effect", first)
        wait_until(lambda: asyncio.run(db_rows(db_url, "SELECT count(*) FROM turns"))[0][0] >= 2, 10,
                   "both turns' rows", first)
    finally:
        first.kill9()
    assert fake_slack.posts(channel=OPS, thread_ts=ts) == []

    model.fast = True
    fake_slack.connections = 0
    lead_calls = model.lead_calls
    second = Bot(env, tmp_path, "second")
    try:
        wait_until(lambda: fake_slack.posts(channel=OPS, thread_ts=ts), 20, "the note in the thread", second)
        asyncio.run(asyncio.sleep(1.0))
        [note] = [c["text"] for c in fake_slack.posts(channel=OPS, thread_ts=ts)]
        assert "restarted" in note and "`notify`" in note and "not done twice" in note
        assert len(fake_slack.posts(channel="C_OPS_ALERTS")) == 1  # the alert was not posted again
        assert model.lead_calls == lead_calls  # the tree was not run again
    finally:
        assert second.stop() == 0, second.output()[-3000:]
    running = asyncio.run(db_rows(db_url, "SELECT count(*) FROM turns WHERE status = 'running'"))
    assert running[0][0] == 0
    parents = asyncio.run(db_rows(db_url, "SELECT parent_turn_id IS NOT NULL, stopped_by FROM turns ORDER BY started_at"))
    assert [p[0] for p in parents] == [False, True]
