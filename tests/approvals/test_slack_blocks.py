"""The approval message shows the model's arguments: no broadcast in them may reach Slack as a ping."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from bot.approvals.records import Approval
from bot.chat.slack.approvals import fallback, request_blocks
from bot.engine.spec.approval import PlatformId


def pending(arguments: str) -> Approval:
    now = datetime.now(UTC)
    return Approval(1, "s", "t", "c", "shell", arguments, "U1", (PlatformId("S_ONCALL"),), False, "slack", "C1", None, None,
                    "pending", None, None, None, now, now + timedelta(minutes=10), None)


def test_broadcasts_in_the_arguments_are_shown_as_text_not_pings():
    a = pending('{"command": "systemctl restart nginx <!channel> [x](!here) <!subteam^S999>"}')
    rendered = json.dumps(request_blocks(a, decided=False)) + fallback(a)
    assert "<!channel>" not in rendered and "<!here" not in rendered and "<!subteam^S999>" not in rendered
    assert "systemctl restart nginx" in rendered
    assert "<!subteam^S_ONCALL>" in rendered  # the approvers named in AGENT.md are still asked by name
