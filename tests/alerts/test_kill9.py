"""`yokebot run` killed with SIGKILL in the middle of an alert group's investigation, then started again: the
investigation is run again in the same thread (the inbox recovers it like a chat turn), the group keeps its one
thread, and nothing is left `running`. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from tests.alerts.harness import PAYLOADS, ROOT_CHANNEL, TOKEN, ops_agent
from tests.fakes.openai_server import FakeOpenAI, Step
from tests.fakes.slack_server import FakeSlack
from tests.helpers import db_rows
from tests.recovery.harness import Bot, run_env, wait_until


class SlowThenFast:
    def __init__(self) -> None:
        self.fast = False

    def __call__(self, body: dict[str, Any]) -> Step:
        if self.fast:
            return Step("reply", content="api-1 answers 5xx since its 21:00 deploy; roll it back.")
        return Step("reply", content="never seen", delay=60.0)


def post(port: str, body: bytes) -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/hooks/alertmanager", data=body, method="POST",
                                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status


def test_kill9_mid_investigation_then_restart_investigates_once_in_the_same_thread(
        tmp_path: Path, db_url: str, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    model = SlowThenFast()
    fake_llm.handler = model
    env = run_env(tmp_path, db_url, fake_slack, fake_llm, YOKEBOT_WEBHOOK_TOKEN=TOKEN)
    ops_agent(tmp_path / "agents")  # replaces the recovery harness's ops agent: one with an alerts route
    port = env["YOKEBOT_HTTP_PORT"]
    body = (PAYLOADS / "alertmanager_firing.json").read_bytes()

    def roots() -> list[Any]:
        return [c for c in fake_slack.posts(ROOT_CHANNEL) if not c.params.get("thread_ts")]

    first = Bot(env, tmp_path, "first")
    try:
        wait_until(lambda: fake_slack.connections >= 1, 30, "the Socket Mode connection", first)
        assert post(port, body) == 200
        wait_until(lambda: roots() and fake_llm.requests, 20, "the root and the investigation at the model", first)
        # the turn's row goes through the write-behind queue (committed within its 25 ms linger): the kill
        # comes once it is there, so the cut turn has a row to be marked interrupted
        wait_until(lambda: _rows(db_url, "SELECT id FROM turns"), 10, "the investigation's turn row", first)
    finally:
        first.kill9()
    ts = roots()[0].result["ts"]
    assert fake_slack.posts(ROOT_CHANNEL, thread_ts=ts) == []

    model.fast = True
    second = Bot(env, tmp_path, "second")
    try:
        wait_until(lambda: fake_slack.posts(ROOT_CHANNEL, thread_ts=ts), 30, "the investigation's answer", second)
        assert post(port, body) == 200  # Alertmanager repeats the group: nothing new
        wait_until(lambda: len(_rows(db_url, "SELECT id FROM alert_notifications WHERE state = 'done'")) == 2,
                   20, "the repeat processed", second)
    finally:
        assert second.stop() == 0

    assert len(roots()) == 1
    assert [p["text"] for p in fake_slack.posts(ROOT_CHANNEL, thread_ts=ts)] == [
        "api-1 answers 5xx since its 21:00 deploy; roll it back."]
    turns = _rows(db_url, "SELECT trigger, status, stopped_by FROM turns ORDER BY started_at")
    assert [(t.trigger, t.status, t.stopped_by) for t in turns] == [
        ("alert", "error", "interrupted"), ("alert", "ok", "answer")]
    inbox = _rows(db_url, "SELECT platform, state, attempts FROM inbox")
    assert [(r.platform, r.state, r.attempts) for r in inbox] == [("alerts", "answered", 2)]
    assert json.loads(body)["groupKey"] == _rows(db_url, "SELECT group_key FROM alert_groups")[0].group_key
    # one incident record across the kill, concluded by the answer that was delivered, on its turn
    incidents = _rows(db_url, "SELECT i.conclusion, t.status FROM incidents i JOIN turns t ON t.id = i.turn_id")
    assert [(r.conclusion, r.status) for r in incidents] == [
        ("api-1 answers 5xx since its 21:00 deploy; roll it back.", "ok")]


def _rows(url: str, sql: str) -> list[Any]:
    import asyncio

    return asyncio.run(db_rows(url, sql))
