"""Shared bits of the approval tests: a gated agent, reading the request message, and the audit rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.app import App
from bot.approvals.desk import ApprovalTiming
from tests.conftest import rows
from tests.fakes.slack_server import FakeSlack
from tests.helpers import eventually, write_agent

BOSS = "U_BOSS"  # an approver by user ID; U_ALICE is in S_ONCALL (the fake's user group) and asks

GATED_AGENT = """
description: ops agent with a gated tool
tools:
  echo: {{}}
  restart_service:
    approval: {{approvers: [U_BOSS, S_ONCALL, "111111111111111111", "222222222222222222"], timeout: {timeout}}}
max_iterations: 4
"""


def gated_agent(agents: Path, timeout: str = "30s") -> None:
    write_agent(agents, "tester", GATED_AGENT.format(timeout=timeout))


def fast(app: App) -> None:
    """Waiting turns poll often, so tests need not wait a second per step."""
    assert app.approvals is not None
    app.approvals.timing = ApprovalTiming(poll_seconds=0.05, heartbeat_seconds=0.2, stale_seconds=2.0)


def blocks_of(call: Any) -> list[dict[str, Any]]:
    raw = call.params.get("blocks")
    if raw is None:
        return []
    return json.loads(raw) if isinstance(raw, str) else raw


async def slack_request(fake: FakeSlack, n: int = 1) -> tuple[str, str, str]:
    """The n-th approval request posted: (channel, ts, approval id)."""
    def found() -> list[Any]:
        return [c for c in fake.calls_to("chat.postMessage")
                if any(b.get("type") == "actions" for b in blocks_of(c))]

    calls = await eventually(lambda: len(found()) >= n and found(), what=f"{n} approval request(s) in Slack")
    c = calls[n - 1]
    actions = next(b for b in blocks_of(c) if b["type"] == "actions")
    return c.result["channel"], c.result["ts"], actions["elements"][0]["value"]


async def approval_rows(app: App) -> list[Any]:
    return await rows(app, "SELECT id, call_id, tool, arguments, requested_by, status, decided_by, decided_at, outcome, "
                           "platform, channel, thread, message_ref FROM approvals ORDER BY id")


async def tool_rows(app: App, tool: str = "restart_service") -> list[Any]:
    return await rows(app, "SELECT status, reason, result, attempts FROM tool_invocations WHERE tool = :t "
                           "ORDER BY id", t=tool)
