"""Approvals in the terminal: `yokebot chat` asks inline (y/N); `yokebot ask` refuses gated calls unless given
--approve. Real subprocesses, the fake model, `shell` with one gated command rule (docs/approvals.md)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import tool_messages
from tests.test_cli import base_env, yokebot

# The worked example of docs/approvals.md, with /bin/echo standing in for systemctl so the test can run it.
OPS = """---
tools:
  shell:
    commands:
      - command: uptime
      - command: systemctl restart nginx
        executable: /bin/echo
        approval: {approvers: [S_ONCALL], timeout: 10m}
---
You are ops.
"""


def ops(tmp_path: Path) -> None:
    agent = tmp_path / "agents" / "ops"
    agent.mkdir(parents=True)
    (agent / "AGENT.md").write_text(OPS)


def script(fake: FakeOpenAI) -> None:
    fake.calls(call("shell", {"command": "systemctl restart nginx"}, "call_restart"))
    fake.reply("Done.")


def audit(tmp_path: Path) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    with sqlite3.connect(tmp_path / "cli.db") as db:
        approvals = db.execute("SELECT tool, arguments, status, decided_by, outcome FROM approvals").fetchall()
        tools = db.execute("SELECT status, reason, result FROM tool_invocations WHERE tool = 'shell'").fetchall()
    return approvals, tools


def seen_by_model(fake: FakeOpenAI) -> str:
    return next(m["content"] for m in tool_messages(fake.requests[1]))


def test_chat_asks_inline_and_yes_runs_the_command_once(tmp_path: Path, fake_llm: FakeOpenAI):
    ops(tmp_path)
    script(fake_llm)
    out = yokebot("chat", "--agent", "ops", env=base_env(tmp_path, fake_llm), stdin="restart nginx\ny\n")
    assert out.returncode == 0, out.stderr
    assert "Approval needed: the agent wants to run shell" in out.stdout
    assert '{"command": "systemctl restart nginx"}' in out.stdout and "approve? (y/N)" in out.stdout
    assert seen_by_model(fake_llm).startswith("$ echo restart nginx\n[exit code 0]\nrestart nginx")
    approvals, tools = audit(tmp_path)
    ((tool, args, status, by, outcome),) = approvals
    assert (tool, args, status, outcome) == ("shell", '{"command": "systemctl restart nginx"}', "approved", "ran")
    assert by.startswith("terminal")
    assert [(s, r) for s, r, _ in tools] == [("ok", f"approved by {by}")]


def test_chat_no_denies_and_the_model_is_told(tmp_path: Path, fake_llm: FakeOpenAI):
    ops(tmp_path)
    script(fake_llm)
    out = yokebot("chat", "--agent", "ops", env=base_env(tmp_path, fake_llm), stdin="restart nginx\nn\n")
    assert out.returncode == 0, out.stderr
    assert "denied the request to run shell" in seen_by_model(fake_llm)
    approvals, tools = audit(tmp_path)
    assert [a[2] for a in approvals] == ["denied"]
    assert [(s, r) for s, r, _ in tools] == [("denied", f"denied by {approvals[0][3]}")]


def test_ask_refuses_a_gated_call_unless_approve_is_given(tmp_path: Path, fake_llm: FakeOpenAI):
    ops(tmp_path)
    script(fake_llm)
    out = yokebot("ask", "--agent", "ops", "restart nginx", env=base_env(tmp_path, fake_llm))
    assert out.returncode == 0, out.stderr
    assert "shell needs a human's approval, so it was not run; run the command again with --approve" in out.stderr
    assert "`yokebot ask` asks nobody" in seen_by_model(fake_llm)
    approvals, tools = audit(tmp_path)
    assert [(a[2], a[3]) for a in approvals] == [("expired", None)]
    assert [t[0] for t in tools] == ["denied"] and tools[0][1].startswith("shell needs a human's approval")

    script(fake_llm)
    env = base_env(tmp_path, fake_llm)
    out = yokebot("ask", "--agent", "ops", "--approve", "--json", "restart nginx", env=env)
    assert out.returncode == 0, out.stderr
    assert "--approve" not in out.stderr
    approvals, tools = audit(tmp_path)
    who = approvals[1][3]
    assert approvals[1][2:] == ("approved", who, "ran") and who.startswith("terminal")
    assert tools[1][0] == "ok" and tools[1][1] == f"approved by {who}"
    turn = json.loads(out.stdout)
    assert turn["tool_calls"][0]["reason"] == f"approved by {who}"
    trace = yokebot("trace", turn["session_id"], env=env)
    assert f"approved by {who}" in trace.stdout and "denied: approved" not in trace.stdout


def test_an_ungated_rule_of_the_same_tool_runs_without_asking(tmp_path: Path, fake_llm: FakeOpenAI):
    ops(tmp_path)
    fake_llm.calls(call("shell", {"command": "uptime"}, "call_uptime")).reply("Up.")
    out = yokebot("ask", "--agent", "ops", "uptime?", env=base_env(tmp_path, fake_llm))
    assert out.returncode == 0, out.stderr
    approvals, tools = audit(tmp_path)
    assert approvals == [] and [(s, r) for s, r, _ in tools] == [("ok", None)]
