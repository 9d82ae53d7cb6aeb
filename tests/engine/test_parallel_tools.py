"""Several tool calls in one model message run at the same time; results go back in the model's order; the
audit says when each ran. A profile can turn it off; a tool that runs alone (notify) keeps its order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build_app
from bot.engine.messages import ToolCall, ToolResult
from bot.engine.run.context import RunContext, ToolContext
from bot.engine.run.hooks import TurnHooks
from bot.engine.run.tooling import Tool, tool
from bot.engine.service import TurnRequest
from bot.tools.notify import make_notify_tool
from tests.conftest import make_settings, rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import registry, tool_messages, write_agent

SIRENS: list[str] = []


@tool("nap", "Sleeps a while, then says which nap it was. Use it in tests.", timeout=5)
async def nap(ctx: ToolContext, label: str, seconds: float = 0.2) -> str:
    await asyncio.sleep(seconds)
    return f"{label} rested"


@tool("siren", "Sounds an alert (in order). Use it in tests.", timeout=5, runs_alone=True)
async def siren(ctx: ToolContext, label: str, seconds: float = 0.05) -> str:
    SIRENS.append(f"start {label}")
    await asyncio.sleep(seconds)
    SIRENS.append(f"end {label}")
    return f"{label} sounded"


class Timeline(TurnHooks):
    def __init__(self) -> None:
        self.events: list[tuple[str, str, float]] = []

    async def tool_started(self, run: RunContext, call: ToolCall) -> None:
        self.events.append(("started", call.id, time.perf_counter()))

    async def tool_finished(self, run: RunContext, result: ToolResult) -> None:
        self.events.append(("finished", result.call_id, time.perf_counter()))

    def window(self) -> float:
        stamps = [t for _, _, t in self.events]
        return max(stamps) - min(stamps)


def tools() -> dict[str, Tool[Any]]:
    return {**registry(), "nap": nap, "siren": siren}


async def app_with(tmp_path: Path, fake_llm: FakeOpenAI, front: str) -> App:
    agents = tmp_path / "agents"
    write_agent(agents, "tester", front)
    url = f"sqlite+aiosqlite:///{tmp_path / 'yokebot.db'}"
    return await build_app(make_settings(url, fake_llm, agents), registry=tools())


@pytest.fixture
async def bot(tmp_path: Path, fake_llm: FakeOpenAI) -> AsyncIterator[App]:
    app = await app_with(tmp_path, fake_llm, "tools: [nap, siren, echo]\nmax_iterations: 4")
    yield app
    await app.close()


def req(text: str) -> TurnRequest:
    return TurnRequest(platform="test", channel="c1", thread="t1", text=text, agent="tester")


def stamp(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


async def test_three_200ms_tools_in_one_message_take_one_nap_not_three(bot: App, fake_llm: FakeOpenAI):
    # the first nap is the longest: the model still reads the results in the order it asked
    fake_llm.calls(call("nap", {"label": "a", "seconds": 0.25}, "c_a"), call("nap", {"label": "b"}, "c_b"),
                   call("nap", {"label": "c", "seconds": 0.15}, "c_c"))
    fake_llm.reply("All rested.")
    timeline = Timeline()
    result = await bot.service.handle(req("rest three times"), hooks=timeline)

    assert result.answer == "All rested."
    assert timeline.window() < 0.3 + 0.05  # 0.25 s for the longest nap; in a row it would be 0.6 s
    assert [m["tool_call_id"] for m in tool_messages(fake_llm.requests[1])] == ["c_a", "c_b", "c_c"]
    assert [m["content"] for m in tool_messages(fake_llm.requests[1])] == ["a rested", "b rested", "c rested"]
    # the audit: all three started before any finished, and each row says when it ran
    assert [kind for kind, _, _ in timeline.events[:3]] == ["started"] * 3
    assert [cid for kind, cid, _ in timeline.events if kind == "finished"] == ["c_c", "c_b", "c_a"]
    audited = await rows(bot, "SELECT call_id, created_at, duration_ms FROM tool_invocations WHERE session_id = :s",
                         s=result.session_id)
    spans = {r.call_id: (stamp(r.created_at) - timedelta(milliseconds=r.duration_ms), stamp(r.created_at))
             for r in audited}
    assert set(spans) == {"c_a", "c_b", "c_c"}
    assert max(s for s, _ in spans.values()) < min(f for _, f in spans.values())  # they overlapped
    assert spans["c_a"][1] - spans["c_a"][0] >= timedelta(milliseconds=240)
    by_call = {r.call_id: r for r in result.tool_calls}
    assert by_call["c_b"].started_at is not None and by_call["c_b"].finished_at is not None
    assert abs(stamp(next(r.created_at for r in audited if r.call_id == "c_b")).replace(tzinfo=None)
               - by_call["c_b"].finished_at.replace(tzinfo=None)) < timedelta(milliseconds=1)


async def test_the_profile_can_turn_parallel_calls_off(tmp_path: Path, fake_llm: FakeOpenAI):
    app = await app_with(tmp_path, fake_llm, "tools: [nap]\nparallel_tool_calls: false")
    try:
        fake_llm.calls(call("nap", {"label": "a", "seconds": 0.1}, "c_a"), call("nap", {"label": "b", "seconds": 0.1},
                                                                                 "c_b"))
        fake_llm.reply("Rested in a row.")
        timeline = Timeline()
        await app.service.handle(req("rest twice"), hooks=timeline)
    finally:
        await app.close()
    assert [(kind, cid) for kind, cid, _ in timeline.events] == [
        ("started", "c_a"), ("finished", "c_a"), ("started", "c_b"), ("finished", "c_b")]
    assert timeline.window() >= 0.2


async def test_a_tool_that_runs_alone_keeps_its_order_between_the_others(bot: App, fake_llm: FakeOpenAI):
    SIRENS.clear()
    # the first siren takes longer than the second: run together they would end out of order
    fake_llm.calls(call("siren", {"label": "one", "seconds": 0.15}, "s1"), call("siren", {"label": "two"}, "s2"),
                   call("nap", {"label": "x", "seconds": 0.1}, "n1"), call("nap", {"label": "y", "seconds": 0.1}, "n2"),
                   call("siren", {"label": "three"}, "s3"))
    fake_llm.reply("Alerts sent.")
    timeline = Timeline()
    await bot.service.handle(req("alert thrice"), hooks=timeline)

    assert SIRENS == ["start one", "end one", "start two", "end two", "start three", "end three"]
    order = [(kind, cid) for kind, cid, _ in timeline.events]
    assert order[:4] == [("started", "s1"), ("finished", "s1"), ("started", "s2"), ("finished", "s2")]
    assert {e for e in order[4:6]} == {("started", "n1"), ("started", "n2")}  # the naps ran together
    assert order[-2:] == [("started", "s3"), ("finished", "s3")]
    assert [m["tool_call_id"] for m in tool_messages(fake_llm.requests[1])] == ["s1", "s2", "n1", "n2", "s3"]


def test_notify_declares_that_it_runs_alone():
    assert make_notify_tool().runs_alone


def test_mcp_tools_run_alone_unless_their_server_says_they_only_read():
    from types import SimpleNamespace

    from mcp_types import Tool as McpTool
    from mcp_types import ToolAnnotations

    from bot.engine.spec.mcp import McpServerSpec
    from bot.mcp.tools import make_tool

    conn: Any = SimpleNamespace(name="srv")
    schema = {"type": "object", "properties": {}}
    reader = McpTool(name="look", input_schema=schema, annotations=ToolAnnotations(read_only_hint=True))
    writer = McpTool(name="restart", input_schema=schema)
    spec = McpServerSpec(command="srv", timeout=5)
    assert not make_tool(conn, reader, spec).runs_alone
    assert make_tool(conn, writer, spec).runs_alone


async def test_the_trace_shows_when_each_call_of_one_reply_started(bot: App, fake_llm: FakeOpenAI):
    import re

    from rich.console import Console

    from bot.observability.queries import trace
    from bot.observability.render import turn_tree

    fake_llm.calls(call("nap", {"label": "a"}, "c_a"), call("nap", {"label": "b", "seconds": 0.1}, "c_b"))
    fake_llm.calls(call("nap", {"label": "c", "seconds": 0.05}, "c_c"))
    fake_llm.reply("Rested.")
    result = await bot.service.handle(req("rest"))
    turn = (await trace(bot.engine, result.session_id)).turns[-1]
    console = Console(record=True, width=200)
    console.print(turn_tree(turn))
    starts = {m.group(1): float(m.group(2))
              for m in re.finditer(r"nap \{\"label\": \"(\w)\".*? at \+(\d+\.\d+) s", console.export_text())}
    assert set(starts) == {"a", "b", "c"}
    assert abs(starts["a"] - starts["b"]) <= 0.02  # one reply's calls started together
    assert starts["c"] >= starts["a"] + 0.2 - 0.01  # (shown to 10 ms) the next reply's call started after the longer of them ended
