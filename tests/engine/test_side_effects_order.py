"""The rule of side effects under parallel tool calls: side-effecting calls of one model message never run at
the same time (one after another, in the model's order), while read-only calls still run alongside them.
Through AgentService -> ReActLoop -> the real openai SDK -> the fake server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build_app
from bot.engine.run.context import ToolContext
from bot.engine.run.tooling import Tool, tool
from bot.engine.service import TurnRequest
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import registry, tool_messages, write_agent

EVENTS: list[str] = []
MEETING: dict[str, asyncio.Event] = {}  # "put", "look": set when that side of the meeting has started


async def meet(me: str, other: str) -> bool:
    """Say I have started and wait (5 s at most) for the other call: True only if both ran at once."""
    MEETING[me].set()
    try:
        async with asyncio.timeout(5):
            await MEETING[other].wait()
    except TimeoutError:
        return False
    return True


@tool("put", "Changes something (in tests).", timeout=10, side_effects=True)
async def put(ctx: ToolContext, label: str, seconds: float = 0.0, meet_look: bool = False) -> str:
    EVENTS.append(f"start {label}")
    met = await meet("put", "look") if meet_look else False
    await asyncio.sleep(seconds)
    EVENTS.append(f"end {label}")
    return f"{label} put" + (" (met look)" if met else "")


@tool("look", "Reads something (in tests).", timeout=10)
async def look(ctx: ToolContext) -> str:
    return "looked alongside put" if await meet("look", "put") else "looked alone"


def tools() -> dict[str, Tool[Any]]:
    return {**registry(), "put": put, "look": look}


@pytest.fixture
async def bot(tmp_path: Path, fake_llm: FakeOpenAI) -> AsyncIterator[App]:
    EVENTS.clear()
    MEETING.clear()
    MEETING.update(put=asyncio.Event(), look=asyncio.Event())
    write_agent(tmp_path / "agents", "tester", "tools: [put, look]\nmax_iterations: 3")
    url = f"sqlite+aiosqlite:///{tmp_path / 'yokebot.db'}"
    app = await build_app(make_settings(url, fake_llm, tmp_path / "agents"), registry=tools())
    yield app
    await app.close()


def req(text: str) -> TurnRequest:
    return TurnRequest(platform="test", channel="c1", thread="t1", text=text, agent="tester")


async def test_side_effecting_calls_run_one_at_a_time_in_the_models_order(bot: App, fake_llm: FakeOpenAI):
    # the first put takes longest: run at once, the later ones would start (and end) before it ends
    fake_llm.calls(call("put", {"label": "a", "seconds": 0.2}, "p_a"), call("put", {"label": "b"}, "p_b"),
                   call("put", {"label": "c", "seconds": 0.05}, "p_c"))
    fake_llm.reply("Done.")
    result = await bot.service.handle(req("put three things"))
    assert result.answer == "Done."
    assert EVENTS == ["start a", "end a", "start b", "end b", "start c", "end c"]
    assert [m["content"] for m in tool_messages(fake_llm.requests[1])] == ["a put", "b put", "c put"]


async def test_a_read_only_call_still_runs_alongside_a_side_effecting_one(bot: App, fake_llm: FakeOpenAI):
    # `put a` and `look` each wait for the other to have started: they meet only if they run at once;
    # `put b` (side effects) waits for `put a` to finish
    fake_llm.calls(call("put", {"label": "a", "meet_look": True}, "p_a"), call("look", {}, "l_1"),
                   call("put", {"label": "b"}, "p_b"))
    fake_llm.reply("Done.")
    await bot.service.handle(req("put and look"))
    assert [m["content"] for m in tool_messages(fake_llm.requests[1])] == [
        "a put (met look)", "looked alongside put", "b put"]
    assert EVENTS == ["start a", "end a", "start b", "end b"]


def test_the_builtin_side_effecting_tools_declare_it():
    from bot.tools import builtin_tools

    assert {name for name, t in builtin_tools().items() if t.side_effects} == {"notify", "remember", "forget"}
