"""A sub-agent's approval request names the sub-agent and its task on every platform (issue 40), Mattermost's
message and Teams' card included, with the task's backticks made harmless."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.approvals.records import Approval


def approval(task: str | None) -> Approval:
    now = datetime.now(UTC)
    return Approval(1, "s", "t", "c", "shell", '{"argv": ["df", "-h"]}', "U1", (), False, "mattermost", "C1", None,
                    None, "pending", None, None, None, now, now + timedelta(minutes=5), None, agent="logs",
                    task=task)


@pytest.mark.parametrize("platform", ["mattermost", "teams"])
def test_a_sub_agents_request_names_it_and_its_task(platform: str):
    from bot.chat.mattermost.approvals import request_text
    from bot.chat.teams.approvals import card

    def render(a: Approval) -> str:
        return request_text(a) if platform == "mattermost" else str(card(a))

    asked = render(approval("check the disk of `web1`"))
    assert "for the `logs` sub-agent, working on: check the disk of 'web1'" in asked
    assert "sub-agent" not in render(approval(None))  # a turn's own call: as before
