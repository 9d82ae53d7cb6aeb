"""Two instances sharing PostgreSQL: a click handled by the instance that did not ask resumes the parked
turn there, and when two approvers click at once on different instances exactly one decision counts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.approvals.desk import ACTION_APPROVE, ACTION_DENY
from tests.approvals.harness import BOSS, approval_rows, fast, gated_agent, slack_request, tool_rows
from tests.approvals.test_slack import ASK_TS, click
from tests.chat.slack_harness import ALICE, answered, mention, start_bot
from tests.conftest import DIRECT_AND_TRANSACTION_POOLING
from tests.fakes.openai_server import FakeOpenAI, call
from tests.fakes.slack_server import FakeSlack
from tests.helpers import RESTARTS, eventually, tool_messages

pytestmark = [pytest.mark.postgres, DIRECT_AND_TRANSACTION_POOLING]  # and through PgBouncer
CAROL = "U_CAROL"


async def test_a_click_on_the_second_instance_resolves_the_turn_waiting_on_the_first(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, pg_database: str, agents_dir: Path
):
    RESTARTS.clear()
    gated_agent(agents_dir)
    fake_llm.calls(call("restart_service", {"service": "nginx"}, "call_restart")).reply("Done.")
    first = await start_bot(fake_slack, fake_llm, pg_database, agents_dir, mode="http")
    second = await start_bot(fake_slack, fake_llm, pg_database, agents_dir, mode="http")
    fast(first.app)
    fast(second.app)
    try:
        await first.deliver(mention("restart nginx please", ASK_TS, user=CAROL))
        _, ts, approval_id = await slack_request(fake_slack)
        await eventually(lambda: first.adapter.pipeline.busy == 0, what="the turn parked on the first")
        await click(second, BOSS, ACTION_APPROVE, approval_id, ts)
        await answered(fake_slack, ASK_TS)
        assert first.adapter.pipeline.busy == 0  # the second instance resumed it; nothing waited on the first
        assert len(fake_llm.requests) == 2
        assert RESTARTS["nginx"] == 1
        assert tool_messages(fake_llm.requests[1])[0]["content"] == "nginx restarted (run 1)"
        (row,) = await approval_rows(first.app)
        assert (row.status, row.decided_by, row.outcome) == ("approved", BOSS, "ran")
        assert [(t.status, t.reason) for t in await tool_rows(first.app)] == [("ok", "approved by U_BOSS")]
        assert not any("no longer running" in str(c.params.get("text")) for c in fake_slack.posts())
    finally:
        await second.stop()
        await first.stop()


@pytest.mark.parametrize("attempt", range(3))
async def test_two_approvers_clicking_at_once_on_two_instances_make_one_decision(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, pg_database: str, agents_dir: Path, attempt: int
):
    RESTARTS.clear()
    gated_agent(agents_dir)
    fake_llm.calls(call("restart_service", {"service": "nginx"}, "call_restart")).reply("Over.")
    first = await start_bot(fake_slack, fake_llm, pg_database, agents_dir, mode="http")
    second = await start_bot(fake_slack, fake_llm, pg_database, agents_dir, mode="http")
    fast(first.app)
    fast(second.app)
    try:
        await first.deliver(mention("restart nginx please", ASK_TS, user=CAROL))
        _, ts, approval_id = await slack_request(fake_slack)
        await asyncio.gather(click(first, BOSS, ACTION_APPROVE, approval_id, ts),
                             click(second, ALICE, ACTION_DENY, approval_id, ts))
        await answered(fake_slack, ASK_TS)
        (row,) = await approval_rows(first.app)
        assert row.status in ("approved", "denied")
        winner, loser = (BOSS, ALICE) if row.status == "approved" else (ALICE, BOSS)
        assert row.decided_by == winner
        assert RESTARTS["nginx"] == (1 if row.status == "approved" else 0)
        told = await eventually(lambda: fake_slack.calls_to("chat.postEphemeral"), what="the loser's answer")
        assert [(c.params["user"], c.params["text"]) for c in told] == [
            (loser, f"This request was already {row.status}.")]
        updated = [c for c in fake_slack.calls_to("chat.update") if c.params.get("ts") == ts]
        assert len(updated) == 1  # the message shows the one decision
        tools = await tool_rows(first.app)
        assert [(t.status, t.reason) for t in tools] == [
            ("ok" if row.status == "approved" else "denied", f"{row.status} by {winner}")]
    finally:
        await second.stop()
        await first.stop()
