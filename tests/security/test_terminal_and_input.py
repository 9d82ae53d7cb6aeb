"""Untrusted text on the terminal (trace, the approval question), end of input during a question, and tool
arguments nested deep enough to crash a validator."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime

import pytest
from rich.console import Console

from bot.engine.messages import ToolCall
from bot.engine.testing import ScriptedModel
from tests.engine.test_scripted import Bot

HOSTILE = "step\x1b]52;c;Y3VybA==\x07\x1b[2J\x9b31m\x9d0;title\x07\x7f done"


def raw_controls(text: str) -> list[str]:
    return [c for c in text if c in "\x07\x7f" or 0x80 <= ord(c) <= 0x9f] + (["ESC]"] if "\x1b]" in text else [])


def test_trace_shows_plan_steps_without_their_control_characters():
    from bot.observability.queries import SessionOverview, SessionTrace, TurnTrace
    from bot.observability.render import trace_json, turn_tree

    plan = {"steps": [{"number": 1, "text": HOSTILE, "status": "done", "iterations": 1, "finding": HOSTILE}],
            "replans": []}
    turn = TurnTrace(1, "t", "cli", HOSTILE, "hi", "ok", "ok", None, 1, False, datetime.now(UTC), None, plan=plan)
    console = Console(force_terminal=True, width=300)
    with console.capture() as shown:
        console.print(turn_tree(turn))
    out = shown.get()
    assert "step" in out and "done" in out
    assert raw_controls(out) == [] and "\x1b[2J" not in out

    now = datetime.now(UTC)
    session = SessionOverview("s1", "cli", "ask", "t", "ops", 1, now, now, 1, 1)
    text = trace_json(SessionTrace(session, [turn]))
    assert raw_controls(text) == []
    assert json.loads(text)["turns"][0]["plan"]["steps"][0]["text"] == HOSTILE  # the data is kept, escaped


async def test_the_approval_question_shows_no_control_characters():
    from bot.chat.console.approvals import ConsoleApprover

    console = Console(force_terminal=True, width=300)
    asked: list[str] = []

    async def ask(question: str) -> str | None:
        asked.append(question)
        return "n"

    approval = type("A", (), {"tool": "shell\x9b2J", "arguments": json.dumps({"cmd": HOSTILE}, ensure_ascii=False),
                              "agent": "ops", "task": None})
    with console.capture() as shown:
        verdict = await ConsoleApprover(console, ask).decide(approval())  # type: ignore[arg-type]
    assert verdict[0] == "denied"
    out = shown.get()
    assert "Approval needed" in out and raw_controls(out) == []


async def test_end_of_input_during_a_question_ends_every_later_read(monkeypatch: pytest.MonkeyPatch):
    """Piped input that ends while an approval is asked: the call is denied, and the REPL's next read is the
    end of input too (it waited for ever: the question had used up the one end-of-input marker)."""
    from bot.chat.console.adapter import LineReader

    monkeypatch.setattr("sys.stdin", io.StringIO("first line\n"))
    reader = LineReader(Console(file=io.StringIO()))
    reader.tty = False
    assert await reader.read() == "first line\n"
    assert await asyncio.wait_for(reader.read("approve? (y/N) "), 10) is None  # the approval question
    assert await asyncio.wait_for(reader.read(), 10) is None  # the REPL's prompt: ends the chat


async def test_arguments_nested_20000_deep_are_an_observation_not_a_crash():
    deep = "[" * 20_000 + "]" * 20_000
    model = ScriptedModel().calls(ToolCall("c1", "echo", '{"text": ' + deep + "}"),
                                  ToolCall("c2", "echo", '{"text": ' + "[" * 3000 + "]" * 3000 + "}")).reply("ok")
    result = await Bot(model).ask("nest")
    assert result.error is None and result.answer == "ok"
    for r in result.tool_calls:
        assert r.status == "error" and "nest deeper than 64 levels" in r.content, r.content
