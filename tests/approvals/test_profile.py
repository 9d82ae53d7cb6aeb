"""AGENT.md: a tool, or one command rule of `shell`, marked as needing approval; bad settings fail clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.engine.errors import ProfileError
from bot.engine.spec.approval import PlatformId, Requester
from bot.engine.spec.profiles import ProfileLoader
from bot.tools.shell import ShellSettings
from tests.helpers import registry, write_agent

GATED = """
tools:
  echo:
    approval: {approvers: [U_ONCALL, S_ONCALL, "123456789012345678", requester], timeout: 90s, self_approve: true}
  shell:
    commands:
      - command: uptime
      - command: systemctl restart nginx
        approval:
          approvers: [S_ONCALL]
"""


def load(tmp_path: Path, front: str):
    write_agent(tmp_path, "ops", front)
    return ProfileLoader(tmp_path, registry()).load("ops")


def test_a_tool_and_one_shell_rule_can_need_approval(tmp_path: Path):
    profile = load(tmp_path, GATED)
    echo = profile.tools["echo"].approval
    assert echo is not None
    assert echo.approvers == (PlatformId("U_ONCALL"), PlatformId("S_ONCALL"), PlatformId("123456789012345678"),
                              Requester())
    assert (echo.timeout_seconds, echo.self_approve) == (90, True)
    shell = profile.tools["shell"]
    assert isinstance(shell, ShellSettings) and shell.approval is None
    uptime, restart = shell.commands
    assert uptime.approval is None
    assert restart.approval is not None
    assert (restart.approval.approvers, restart.approval.timeout_seconds, restart.approval.self_approve) == (
        (PlatformId("S_ONCALL"),), 600, False)


@pytest.mark.parametrize(("approval", "says"), [
    ("{approvers: [alice]}", "'alice' is not an approver; use a Slack user ID"),
    ("{approvers: []}", "at least 1 item"),
    ("{approvers: [U_ONCALL], timeout: soon}", "'soon' is not a duration; write it like 90s, 10m or 2h"),
    ("{approvers: [U_ONCALL], timeout: 3d}", "'3d' is not a duration"),
    ("{approvers: [U_ONCALL], timeout: 48h}", "between 1 s and 24 h"),
    ("{approvers: [U_ONCALL], who: me}", "unknown setting"),
])
def test_a_bad_approval_setting_names_the_file_line_and_problem(tmp_path: Path, approval: str, says: str):
    with pytest.raises(ProfileError) as caught:
        load(tmp_path, f"tools:\n  echo:\n    approval: {approval}\n")
    assert says in str(caught.value)
    assert "tools.echo.approval" in str(caught.value)
    assert caught.value.line == 4


def test_a_bad_approval_on_a_shell_rule_points_at_the_rule(tmp_path: Path):
    front = "tools:\n  shell:\n    commands:\n      - command: uptime\n        approval: {approvers: [nginx-team]}\n"
    with pytest.raises(ProfileError) as caught:
        load(tmp_path, front)
    assert "tools.shell.commands.0.approval.approvers" in str(caught.value)
    assert "'nginx-team' is not an approver" in str(caught.value)
