"""A gated call in a scheduled run: the request goes to the schedule's post_to channel and the run waits
for it within the timeout."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.approvals.desk import ACTION_APPROVE
from bot.scheduling.setup import schedule_runner, synced_store
from bot.store.models import utcnow
from tests.approvals.harness import BOSS, approval_rows, fast, slack_request, tool_rows
from tests.approvals.test_slack import click
from tests.chat.slack_harness import start_bot
from tests.fakes.openai_server import FakeOpenAI, call
from tests.fakes.slack_server import FakeSlack
from tests.helpers import RESTARTS, write_agent

NIGHTLY = """
tools:
  restart_service:
    approval: {approvers: [U_BOSS], timeout: 30s}
schedules:
  - {name: nightly, every: 1h, prompt: "Restart nginx.", post_to: "slack:#ops-alerts"}
"""


async def test_a_scheduled_run_asks_in_its_channel_and_waits_for_the_decision(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    RESTARTS.clear()
    write_agent(agents_dir, "tester", NIGHTLY)
    fake_llm.calls(call("restart_service", {"service": "nginx"}, "call_restart")).reply("Restarted nginx.")
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, agents_dir)
    fast(bot.app)
    try:
        store, _ = await synced_store(bot.app)
        run = asyncio.create_task(schedule_runner(bot.app, store).run(
            (await store.get("tester/nightly")), utcnow(), kind="scheduled"))  # type: ignore[arg-type]
        channel, ts, approval_id = await slack_request(fake_slack)
        assert channel == "C_OPS_ALERTS"
        request = next(c for c in fake_slack.calls_to("chat.postMessage") if c.result["ts"] == ts)
        assert not request.params.get("thread_ts")  # top level in the schedule's channel
        assert RESTARTS["nginx"] == 0 and not run.done()

        await click(bot, BOSS, ACTION_APPROVE, approval_id, ts, thread="", channel=channel)
        outcome = await asyncio.wait_for(run, 10)
        assert outcome is not None and outcome.status == "ok"
        assert RESTARTS["nginx"] == 1
        (row,) = await approval_rows(bot.app)
        assert (row.platform, row.channel, row.requested_by, row.status, row.decided_by, row.outcome) == (
            "slack", "#ops-alerts", "schedule:tester/nightly", "approved", BOSS, "ran")
        assert [(t.status, t.reason) for t in await tool_rows(bot.app)] == [("ok", "approved by U_BOSS")]
        assert any(c.params.get("text") == "Restarted nginx." for c in fake_slack.posts())
    finally:
        await bot.stop()
