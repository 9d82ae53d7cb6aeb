"""Approvals hold inside a tree: a sub-agent's gated tool asks the same humans in the parent's thread (naming the
sub-agent and its task), the whole tree parks like one turn and resumes after a restart; `ask --approve`
approves for the whole tree. Real Bolt against the fake Slack, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from bot.approvals.desk import ACTION_APPROVE
from bot.chat.console.approvals import CliApprover
from bot.engine.service import TurnRequest
from tests.approvals.harness import BOSS, approval_rows, blocks_of, fast, slack_request, tool_rows
from tests.approvals.test_slack import ASK_TS, click, thread_texts
from tests.chat.slack_harness import answered, mention, start_bot
from tests.conftest import rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.fakes.slack_server import FakeSlack
from tests.helpers import RESTARTS, eventually, tool_messages, write_agent

TASK = "Restart nginx, then say whether it came back."


def gated_tree(agents: Path) -> None:
    write_agent(agents, "tester", "description: the lead\ntools: [echo]\ndelegate: [fixer]\nmax_iterations: 4",
                body="You are the lead.")
    write_agent(agents, "fixer", """
description: restarts services, with a human's approval
tools:
  restart_service:
    approval: {approvers: [U_BOSS], timeout: 5m}
max_iterations: 3
""", body="You are the fixer.")


def script(fake_llm: FakeOpenAI) -> None:
    fake_llm.calls(call("delegate", {"agent": "fixer", "task": TASK}, "call_d"))
    fake_llm.calls(call("restart_service", {"service": "nginx"}, "call_r"))  # the fixer's gated call: parks
    fake_llm.reply("nginx restarted and is back (run 1).")  # the fixer, resumed
    fake_llm.reply("Done: the fixer restarted nginx; it is back.")  # the lead, resumed


async def test_a_sub_agents_approval_parks_the_tree_and_a_click_after_a_restart_resumes_it_once(
        fake_slack: FakeSlack, fake_llm: FakeOpenAI, db_url: str, agents_dir: Path):
    RESTARTS.clear()
    gated_tree(agents_dir)
    script(fake_llm)
    first = await start_bot(fake_slack, fake_llm, db_url, agents_dir, slack_drain_seconds=0.2)
    fast(first.app)
    await first.deliver(mention("nginx is stuck, restart it", ASK_TS))
    _, ts, approval_id = await slack_request(fake_slack)
    # asked in the parent's thread, naming the sub-agent and its task
    request = next(c for c in fake_slack.calls_to("chat.postMessage") if c.result["ts"] == ts)
    assert request.params.get("thread_ts") == ASK_TS
    head = blocks_of(request)[0]["text"]["text"]
    assert "`restart_service` for the `fixer` sub-agent, working on: " + TASK in head
    await eventually(lambda: first.adapter.pipeline.busy == 0, what="the tree parked (its task ended)")
    parked = await rows(first.app, "SELECT state, lease_owner FROM inbox")
    assert [(r.state, r.lease_owner) for r in parked] == [("parked", None)]
    await first.stop()
    assert RESTARTS["nginx"] == 0 and len(fake_llm.requests) == 2

    second = await start_bot(fake_slack, fake_llm, db_url, agents_dir)
    fast(second.app)
    try:
        await click(second, BOSS, ACTION_APPROVE, approval_id, ts)
        await answered(fake_slack, ASK_TS)
        assert RESTARTS["nginx"] == 1
        assert len(fake_llm.requests) == 4  # the tree went on from its state: nothing ran again
        assert tool_messages(fake_llm.requests[2])[0]["content"] == "nginx restarted (run 1)"
        assert tool_messages(fake_llm.requests[3])[0]["content"] == "nginx restarted and is back (run 1)."
        assert thread_texts(fake_slack).count("Done: the fixer restarted nginx; it is back.") == 1
        (row,) = await approval_rows(second.app)
        assert (row.status, row.decided_by, row.outcome, row.call_id) == ("approved", BOSS, "ran", "call_d/call_r")
        turns = await rows(second.app, "SELECT t.id, t.status, t.parent_turn_id, t.parent_call_id, s.agent FROM turns t "
                                       "JOIN sessions s ON s.id = t.session_id ORDER BY t.started_at")
        lead, fixer = turns
        assert (lead.agent, lead.status, fixer.agent, fixer.status) == ("tester", "ok", "fixer", "ok")
        assert (fixer.parent_turn_id, fixer.parent_call_id) == (lead.id, "call_d")
        who = await rows(second.app, "SELECT agent, task, turn_id FROM approvals")
        assert (who[0].agent, who[0].task, who[0].turn_id) == ("fixer", TASK, lead.id)
        assert [(t.status, t.reason) for t in await tool_rows(second.app)] == [("ok", "approved by U_BOSS")]
    finally:
        await second.stop()


async def test_ask_approve_approves_for_the_whole_tree(tmp_path: Path, fake_llm: FakeOpenAI, sqlite_url: str):
    from bot.app import build_app
    from tests.conftest import make_settings
    from tests.helpers import registry

    RESTARTS.clear()
    gated_tree(tmp_path / "agents")
    script(fake_llm)
    app = await build_app(make_settings(sqlite_url, fake_llm, tmp_path / "agents"), registry=registry())
    try:
        assert app.approvals is not None
        app.approvals.register_inline("console", CliApprover(True))
        result = await app.service.handle(TurnRequest("console", "cli", "t1", "restart nginx", "tester", "cli"))
        assert result.answer == "Done: the fixer restarted nginx; it is back." and RESTARTS["nginx"] == 1
        (row,) = await approval_rows(app)
        assert row.status == "approved" and row.decided_by.startswith("terminal")
    finally:
        await app.close()
