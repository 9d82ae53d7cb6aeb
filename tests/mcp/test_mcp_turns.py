"""MCP tools through whole turns: the real SDK client against the fake MCP server (the SDK's server API) over
stdio and streamable HTTP, the real openai SDK against the scripted model, audit rows in SQL."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import App, build_app
from bot.engine.service import TurnRequest
from tests.conftest import make_settings, rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import registry, write_agent
from tests.mcp.conftest import FAST, HttpServer, stdio_server


def req(text: str, thread: str = "t1") -> TurnRequest:
    return TurnRequest(platform="test", channel="c1", thread=thread, text=text, agent="ops")


def offered(request: dict) -> list[str]:
    return sorted(t["function"]["name"] for t in request.get("tools", []))


async def start_bot(tmp_path: Path, fake_llm: FakeOpenAI, servers: str, **overrides) -> App:
    agents = tmp_path / "agents"
    write_agent(agents, "ops", f"description: ops\ntools: [current_time]\nmcp:{servers}")
    settings = make_settings(f"sqlite+aiosqlite:///{tmp_path / 'y.db'}", fake_llm, agents, default_agent="ops",
                             **{**FAST, **overrides})
    return await build_app(settings, registry=registry())


@pytest.fixture
async def stdio_bot(tmp_path: Path, fake_llm: FakeOpenAI) -> AsyncIterator[App]:
    app = await start_bot(tmp_path, fake_llm, stdio_server("[echo, add, leak, crash, hang, pid]"))
    yield app
    await app.close()


async def test_stdio_tool_call_end_to_end_with_its_audit_row(stdio_bot: App, fake_llm: FakeOpenAI):
    fake_llm.calls(call("ops__add", {"a": 2, "b": 40}, "call_1")).reply("2 + 40 = 42")

    result = await stdio_bot.service.handle(req("add 2 and 40"))

    assert result.answer == "2 + 40 = 42"
    assert [(r.tool, r.status, r.content) for r in result.tool_calls] == [("ops__add", "ok", "42")]
    first = fake_llm.requests[0]
    assert offered(first) == ["current_time", "ops__add", "ops__crash", "ops__echo", "ops__hang", "ops__leak",
                              "ops__pid"]
    add = next(t["function"] for t in first["tools"] if t["function"]["name"] == "ops__add")
    assert add["description"] == "Add two integers."
    assert add["parameters"]["properties"] == {"a": {"type": "integer"}, "b": {"type": "integer"}}
    assert add["parameters"]["required"] == ["a", "b"]
    assert fake_llm.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "42"}
    audit = await rows(stdio_bot, "SELECT tool, arguments, result, status, duration_ms FROM tool_invocations "
                                  "WHERE session_id = :s", s=result.session_id)
    assert [(a.tool, json.loads(a.arguments) if isinstance(a.arguments, str) else a.arguments, a.result, a.status)
            for a in audit] == [("ops__add", {"a": 2, "b": 40}, "42", "ok")]
    assert audit[0].duration_ms > 0


async def test_a_tool_not_on_the_list_is_never_offered_nor_run(stdio_bot: App, fake_llm: FakeOpenAI):
    fake_llm.calls(call("ops__drop_database", {})).reply("I cannot do that.")

    result = await stdio_bot.service.handle(req("drop the database"))

    assert "ops__drop_database" not in offered(fake_llm.requests[0])
    assert result.tool_calls[0].status == "error"
    assert "there is no tool named 'ops__drop_database'" in result.tool_calls[0].content
    assert result.answer == "I cannot do that."


async def test_arguments_that_break_the_schema_are_refused_before_the_server(stdio_bot: App, fake_llm: FakeOpenAI):
    fake_llm.calls(call("ops__add", {"a": "two", "b": 1})).reply("oops")
    result = await stdio_bot.service.handle(req("add"))
    assert result.tool_calls[0].status == "error"
    assert "invalid arguments for ops__add" in result.tool_calls[0].content
    assert "'two' is not of type 'integer'" in result.tool_calls[0].content
