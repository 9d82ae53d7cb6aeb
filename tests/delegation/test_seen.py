"""What people see of a tree: live progress with the sub-agent's steps under its delegate line, the trace as a
tree, `usage --by agent`; three sub-agents run at once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bot.app import App
from bot.chat.core.progress import Progress
from bot.observability.queries import trace
from bot.observability.render import turn_tree
from bot.observability.usage import usage
from tests.delegation.conftest import LOG_LINE, ask
from tests.fakes.openai_server import FakeOpenAI, Step, call


class Surface:
    def __init__(self) -> None:
        self.statuses: list[str] = []

    async def status(self, text: str) -> None:
        self.statuses.append(text)

    async def stream(self, partial: str) -> None:
        return None


def by_agent(script: dict[str, list[Step]]) -> Any:
    """A model that answers each agent from its own script (sub-agents that run at once ask in any order)."""
    def handler(body: dict[str, Any]) -> Step:
        system = body["messages"][0]["content"]
        agent = next(name for name in script if f"You are the {name}" in system)
        return script[agent].pop(0)
    return handler


def d(agent: str, task: str, call_id: str) -> dict[str, Any]:
    return call("delegate", {"agent": agent, "task": task}, call_id)


async def test_live_progress_shows_each_sub_agents_steps_under_its_delegate_line(
        tree_bot: App, fake_llm: FakeOpenAI, tree_dirs: tuple[Path, Path]):
    log = str(tree_dirs[1] / "error.log")
    fake_llm.handler = by_agent({
        "lead": [Step("calls", calls=[d("logs", "find the 502", "d1"), d("metrics", "rate?", "d2")]),
                 Step("reply", content="Both done.")],
        "logs": [Step("calls", calls=[call("tail_log", {"path": log, "contains": "502"}, "t1")], delay=0.2),
                 Step("reply", content=LOG_LINE)],
        "metrics": [Step("calls", calls=[call("echo", {"text": "40 rps"}, "t1")]),
                    Step("reply", content="40 rps", delay=0.3)],
    })
    surface = Surface()
    progress = Progress(surface, "compact", interval=0.0)

    result = await tree_bot.service.handle(ask("what is going on?"), hooks=progress)
    await progress.close()

    assert result.answer == "Both done."
    lines = (progress.summary() or "").splitlines()
    shown = [ln.split(" ✓")[0] for ln in lines]
    assert shown[0] == "`delegate logs`" and shown[2:] == ["`delegate metrics`", "↳ `echo 40 rps`"]
    assert shown[1].startswith("↳ `tail_log ") and shown[1].endswith("/logs/error.log`")
    assert all("✓" in ln for ln in lines)
    # the sub-agents' text never reached the parent's answer stream
    assert progress.partial in ("", "Both done.")


async def test_trace_shows_the_tree_and_usage_counts_each_agents_own_calls(tree_bot: App, fake_llm: FakeOpenAI):
    fake_llm.calls(d("metrics", "rate?", "d1"))
    fake_llm.reply("40 rps")
    fake_llm.reply("The rate is 40 rps.")
    result = await tree_bot.service.handle(ask("rate?"))

    tr = await trace(tree_bot.engine, result.session_id)
    from rich.console import Console

    console = Console(width=160, record=True)
    console.print(turn_tree(tr.turns[0]))
    text = console.export_text()
    assert text.index("tool delegate") < text.index("sub-agent metrics") < text.index("task: rate?")
    assert "answer: 40 rps" in text

    report = await usage(tree_bot.engine, by="agent")
    assert {r.key: r.calls for r in report.rows} == {"lead": 2, "metrics": 1}


async def test_three_sub_agents_at_300_ms_each_run_at_the_same_time(tree_bot: App, fake_llm: FakeOpenAI,
                                                                    tree_dirs: tuple[Path, Path]):
    fake_llm.handler = by_agent({
        "lead": [Step("calls", calls=[d("metrics", f"rate of host {i}?", f"d{i}") for i in range(3)]),
                 Step("reply", content="done")],
        "metrics": [Step("reply", content="40 rps", delay=0.3) for _ in range(3)],
    })
    started = time.monotonic()
    result = await tree_bot.service.handle(ask("rates?"))
    took = time.monotonic() - started
    assert result.answer == "done" and [r.content for r in result.tool_calls] == ["40 rps"] * 3
    assert took < 0.9 + 0.6, took  # one after another would be 0.9 s of model time alone


async def test_otel_exports_the_sub_agents_invoke_agent_span_under_the_parents_delegate_span(
        tmp_path: Path, fake_llm: FakeOpenAI, tree_dirs: tuple[Path, Path]):
    from bot.app import build_app
    from tests.conftest import make_settings, rows
    from tests.fakes.otlp_server import FakeOtlp
    from tests.helpers import registry

    otlp = FakeOtlp().start()
    try:
        settings = make_settings(f"sqlite+aiosqlite:///{tmp_path / 'otel.db'}", fake_llm, tree_dirs[0],
                                 otel_endpoint=otlp.endpoint)
        app = await build_app(settings, registry=registry())
        fake_llm.calls(d("metrics", "rate?", "d1"))
        fake_llm.calls(call("echo", {"text": "40"}, "e1"))
        fake_llm.reply("40 rps")
        fake_llm.reply("The rate is 40 rps.")
        try:
            result = await app.service.handle(ask("rate?"))
            (child,) = await rows(app, "SELECT id FROM turns WHERE parent_turn_id = :p", p=result.turn_id)
        finally:
            await app.close()  # flushes
        spans = otlp.wait_for(8)
    finally:
        otlp.stop()
    named = {s.name: s for s in spans}
    root, delegate, sub = named["invoke_agent lead"], named["execute_tool delegate"], named["invoke_agent metrics"]
    assert {s.trace_id for s in spans} == {result.turn_id}  # one trace for the whole tree
    assert delegate.parent_id == root.span_id and sub.parent_id == delegate.span_id
    assert sub.attributes["yokebot.turn.id"] == child.id and sub.attributes["yokebot.parent_turn.id"] == result.turn_id
    assert named["execute_tool echo"].parent_id == sub.span_id
    chats = [s for s in spans if s.name == "chat test-model"]
    assert sorted(c.parent_id for c in chats) == sorted([root.span_id, root.span_id, sub.span_id, sub.span_id])
