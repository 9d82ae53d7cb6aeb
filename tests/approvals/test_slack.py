"""Approval buttons in Slack, through real Bolt against the fake Slack: approve, deny, a click by someone who may
not decide, expiry, a click after a restart (Socket Mode and signed HTTP `block_actions`)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlencode

import aiohttp
import pytest

from bot.approvals.desk import ACTION_APPROVE, ACTION_DENY
from tests.approvals.harness import BOSS, approval_rows, blocks_of, fast, gated_agent, slack_request, tool_rows
from tests.chat.slack_harness import ALICE, MALLORY, OPS, SECRET, SlackBot, answered, mention, start_bot
from tests.conftest import rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.fakes.slack_server import FakeSlack, block_actions, sign
from tests.helpers import RESTARTS, eventually, tool_messages

ASK_TS = "1700000100.000100"


async def click(bot: SlackBot, user: str, action: str, approval_id: str, ts: str, thread: str = ASK_TS,
                channel: str = OPS) -> None:
    payload = block_actions(user, action, approval_id, channel, ts, thread)
    if bot.mode == "socket":
        bot.fake.push_interactive(payload)
        return
    body = urlencode({"payload": json.dumps(payload)})
    headers = {**sign(SECRET, body), "Content-Type": "application/x-www-form-urlencoded"}
    async with aiohttp.ClientSession() as s, s.post(bot.events_url, data=body, headers=headers) as resp:
        assert resp.status == 200


def updates(fake: FakeSlack, ts: str) -> list[str]:
    return [" ".join(str(e.get("text", "")) for b in blocks_of(c) for e in b.get("elements", []))
            for c in fake.calls_to("chat.update") if c.params.get("ts") == ts]


def thread_texts(fake: FakeSlack) -> list[str]:
    return [str(c.params.get("text")) for c in fake.posts(thread_ts=ASK_TS)]


@pytest.fixture
def restart_script(fake_llm: FakeOpenAI) -> FakeOpenAI:
    RESTARTS.clear()
    fake_llm.calls(call("restart_service", {"service": "nginx"}, "call_restart"))
    fake_llm.reply("Done.")
    return fake_llm


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_approve_runs_the_tool_once_and_the_audit_says_who(
    fake_slack: FakeSlack, restart_script: FakeOpenAI, sqlite_url: str, agents_dir: Path, mode: str
):
    gated_agent(agents_dir)
    bot = await start_bot(fake_slack, restart_script, sqlite_url, agents_dir, mode=mode)
    fast(bot.app)
    try:
        await bot.deliver(mention("restart nginx please", ASK_TS))
        channel, ts, approval_id = await slack_request(fake_slack)
        request = next(c for c in fake_slack.calls_to("chat.postMessage") if c.result["ts"] == ts)
        shown = json.dumps(blocks_of(request))
        assert request.params["thread_ts"] == ASK_TS and channel == OPS
        assert "restart_service" in shown and '{\\"service\\": \\"nginx\\"}' in shown
        assert "<@U_BOSS>" in shown and "<!subteam^S_ONCALL>" in shown
        assert RESTARTS["nginx"] == 0  # nothing runs before someone decides

        await click(bot, BOSS, ACTION_APPROVE, approval_id, ts)
        await answered(fake_slack, ASK_TS)

        assert RESTARTS["nginx"] == 1
        assert tool_messages(restart_script.requests[1])[0]["content"] == "nginx restarted (run 1)"
        assert any("Approved by <@U_BOSS>" in u for u in updates(fake_slack, ts))
        (row,) = await approval_rows(bot.app)
        assert (row.status, row.decided_by, row.outcome, row.requested_by) == ("approved", BOSS, "ran", ALICE)
        assert row.decided_at is not None and row.message_ref == f"{OPS}:{ts}"
        assert [(t.status, t.reason) for t in await tool_rows(bot.app)] == [("ok", "approved by U_BOSS")]
    finally:
        await bot.stop()


async def test_deny_tells_the_model_who_denied_and_nothing_runs(
    fake_slack: FakeSlack, restart_script: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    gated_agent(agents_dir)
    bot = await start_bot(fake_slack, restart_script, sqlite_url, agents_dir)
    fast(bot.app)
    try:
        await bot.deliver(mention("restart nginx please", ASK_TS))
        _, ts, approval_id = await slack_request(fake_slack)
        await click(bot, BOSS, ACTION_DENY, approval_id, ts)
        await answered(fake_slack, ASK_TS)

        assert RESTARTS["nginx"] == 0
        seen = tool_messages(restart_script.requests[1])[0]["content"]
        assert seen.startswith("Not run: U_BOSS denied the request to run restart_service")
        assert any("Denied by <@U_BOSS>" in u for u in updates(fake_slack, ts))
        (row,) = await approval_rows(bot.app)
        assert (row.status, row.decided_by, row.outcome) == ("denied", BOSS, None)
        assert [(t.status, t.reason) for t in await tool_rows(bot.app)] == [("denied", "denied by U_BOSS")]
        # a second click changes nothing: exactly one decision counts
        await click(bot, BOSS, ACTION_APPROVE, approval_id, ts)
        await eventually(lambda: len(fake_slack.calls_to("chat.postEphemeral")) == 1, what="the private answer")
        assert fake_slack.calls_to("chat.postEphemeral")[0].params["text"] == "This request was already denied."
        assert RESTARTS["nginx"] == 0
    finally:
        await bot.stop()


async def test_someone_who_may_not_approve_is_told_privately_and_the_request_stays_open(
    fake_slack: FakeSlack, restart_script: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    gated_agent(agents_dir)
    bot = await start_bot(fake_slack, restart_script, sqlite_url, agents_dir)
    fast(bot.app)
    try:
        await bot.deliver(mention("restart nginx please", ASK_TS))
        _, ts, approval_id = await slack_request(fake_slack)
        await click(bot, MALLORY, ACTION_APPROVE, approval_id, ts)  # in no approver list
        await click(bot, ALICE, ACTION_APPROVE, approval_id, ts)  # on-call, but she asked (self_approve: false)
        ephemeral = await eventually(lambda: len(fake_slack.calls_to("chat.postEphemeral")) == 2
                                     and fake_slack.calls_to("chat.postEphemeral"), what="two private answers")
        assert sorted(c.params["user"] for c in ephemeral) == [ALICE, MALLORY]
        assert all(c.params["text"].startswith("You may not approve this request") for c in ephemeral)
        assert RESTARTS["nginx"] == 0 and updates(fake_slack, ts) == []
        assert [r.status for r in await approval_rows(bot.app)] == ["pending"]

        await click(bot, "U_CAROL", ACTION_APPROVE, approval_id, ts)  # Carol is not on call either
        await click(bot, BOSS, ACTION_APPROVE, approval_id, ts)
        await answered(fake_slack, ASK_TS)
        assert RESTARTS["nginx"] == 1
        assert [(t.status, t.reason) for t in await tool_rows(bot.app)] == [("ok", "approved by U_BOSS")]
    finally:
        await bot.stop()


async def test_a_request_nobody_decides_expires_and_the_thread_is_told(
    fake_slack: FakeSlack, restart_script: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    gated_agent(agents_dir, timeout="1s")
    bot = await start_bot(fake_slack, restart_script, sqlite_url, agents_dir)
    fast(bot.app)
    try:
        await bot.deliver(mention("restart nginx please", ASK_TS))
        _, ts, approval_id = await slack_request(fake_slack)
        await answered(fake_slack, ASK_TS)

        assert RESTARTS["nginx"] == 0
        assert tool_messages(restart_script.requests[1])[0]["content"].startswith(
            "Not run: nobody approved restart_service within 1 s")
        assert any("Nobody approved `restart_service` within 1 s" in t for t in thread_texts(fake_slack))
        assert any("Expired at" in u for u in updates(fake_slack, ts))
        (row,) = await approval_rows(bot.app)
        assert (row.status, row.decided_by) == ("expired", None)
        assert [(t.status, t.reason) for t in await tool_rows(bot.app)] == [("denied", "approval expired")]
        await click(bot, BOSS, ACTION_APPROVE, approval_id, ts)  # too late
        await eventually(lambda: fake_slack.calls_to("chat.postEphemeral"), what="the private answer")
        assert fake_slack.calls_to("chat.postEphemeral")[0].params["text"] == "This request was already expired."
        assert RESTARTS["nginx"] == 0
    finally:
        await bot.stop()


async def test_a_click_after_a_restart_resumes_the_parked_turn_once_with_one_answer(
    fake_slack: FakeSlack, restart_script: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    gated_agent(agents_dir)
    first = await start_bot(fake_slack, restart_script, sqlite_url, agents_dir, slack_drain_seconds=0.2)
    fast(first.app)
    await first.deliver(mention("restart nginx please", ASK_TS))
    _, ts, approval_id = await slack_request(fake_slack)
    await eventually(lambda: first.adapter.pipeline.busy == 0, what="the turn parked (its task ended)")
    await first.stop()  # nothing is in flight: the parked turn is a row, not a task
    assert not any("restarted" in t for t in thread_texts(fake_slack))

    second = await start_bot(fake_slack, restart_script, sqlite_url, agents_dir)
    fast(second.app)
    try:
        await click(second, BOSS, ACTION_APPROVE, approval_id, ts)
        await answered(fake_slack, ASK_TS)
        assert RESTARTS["nginx"] == 1
        assert len(restart_script.requests) == 2  # resumed from its state, not run again from scratch
        assert tool_messages(restart_script.requests[1])[0]["content"] == "nginx restarted (run 1)"
        assert thread_texts(fake_slack).count("Done.") == 1
        assert not any("no longer running" in t for t in thread_texts(fake_slack))
        (row,) = await approval_rows(second.app)
        assert (row.status, row.decided_by, row.outcome) == ("approved", BOSS, "ran")
        assert any("Approved by <@U_BOSS>" in u for u in updates(fake_slack, ts))
        assert [(t.status, t.reason) for t in await tool_rows(second.app)] == [("ok", "approved by U_BOSS")]
        turns = await rows(second.app, "SELECT status FROM turns")
        assert [t.status for t in turns] == ["ok"]  # one turn, parked and resumed
    finally:
        await second.stop()


async def test_a_secret_in_the_arguments_is_redacted_in_the_request_and_the_row(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    RESTARTS.clear()
    gated_agent(agents_dir)
    fake_llm.calls(call("restart_service", {"service": "nginx sk-test-key-123"}, "call_leak")).reply("No.")
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, agents_dir)
    fast(bot.app)
    try:
        await bot.deliver(mention("restart nginx please", ASK_TS))
        _, ts, approval_id = await slack_request(fake_slack)
        request = next(c for c in fake_slack.calls_to("chat.postMessage") if c.result["ts"] == ts)
        assert "sk-test-key-123" not in json.dumps(request.params)
        assert "nginx" in json.dumps(blocks_of(request))
        await click(bot, BOSS, ACTION_DENY, approval_id, ts)
        await answered(fake_slack, ASK_TS)
        (row,) = await approval_rows(bot.app)
        assert "sk-test-key-123" not in row.arguments and "nginx" in row.arguments
        assert all("sk-test-key-123" not in json.dumps(c.params) for c in fake_slack.calls_to("chat.update"))
    finally:
        await bot.stop()
