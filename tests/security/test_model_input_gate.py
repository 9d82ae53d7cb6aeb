"""The model-input gate (the executor, `for_model`): a tool's result reaches the model, and the audit rows of
the model's request and of the call, with no escape sequence and no C0/C1 control character (tab and line feed
kept), whichever tool made it: a built-in one (prometheus_query, its label values from a Prometheus API on a
real socket) or an MCP server's (the SDK's own server over stdio). Both databases."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiohttp import web

from bot.app import build_app
from bot.engine.service import TurnRequest
from bot.tools import builtin_tools
from tests.conftest import make_settings, rows
from tests.fakes.loopback import LoopbackServer
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import registry, tool_messages, write_agent
from tests.mcp.conftest import FAST, stdio_server

TITLE = "\x1b]0;title\x07"  # OSC 0: sets the terminal's title
HOSTILE = f"db-1{TITLE}\x1b[31m:9100\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\\x9b2J\x9d0;t\x07\x7f\r\x00\x0b"


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():  # type: ignore[reportUnknownVariableType]
            yield str(key)
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:  # type: ignore[reportUnknownVariableType]
            yield from strings(item)


def controls(value: Any) -> list[str]:
    """Every C0/C1 control character but tab and line feed in any string of `value` (decoded JSON)."""
    return [c for s in strings(value) for c in s if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


def prometheus_api() -> LoopbackServer:
    """A Prometheus HTTP API whose series carry label values with escape sequences (JSON escapes them on the
    wire; the client decodes them back into the characters)."""
    async def query(request: web.Request) -> web.Response:
        metric = {"__name__": "up", "instance": HOSTILE, "job": f"node{TITLE}"}
        return web.json_response({"status": "success",
                                  "data": {"resultType": "vector", "result": [{"metric": metric, "value": [1, "1"]}]}})

    app = web.Application()
    app.router.add_get("/api/v1/query", query)
    return LoopbackServer(app).start()


async def audited_without_controls(app: Any, session_id: str) -> None:
    """The model's requests as the audit recorded them, the tool's row and the thread's tool message."""
    requests = await rows(app, "SELECT request FROM llm_calls WHERE session_id = :s", s=session_id)
    assert requests and controls([r.request if isinstance(r.request, dict) else json.loads(r.request)
                                  for r in requests]) == []
    calls = await rows(app, "SELECT result FROM tool_invocations WHERE session_id = :s", s=session_id)
    assert calls and controls([c.result for c in calls]) == []
    messages = await rows(app, "SELECT content FROM messages WHERE session_id = :s AND role = 'tool'", s=session_id)
    assert messages and controls([m.content for m in messages]) == []


async def test_prometheus_label_values_reach_the_model_without_escape_sequences(
        db_url: str, tmp_path: Path, fake_llm: FakeOpenAI):
    site = prometheus_api()
    agents = tmp_path / "agents"
    write_agent(agents, "metrics", f'description: metrics\ntools:\n  prometheus_query: {{url: "{site.url}"}}')
    app = await build_app(make_settings(db_url, fake_llm, agents, default_agent="metrics"), registry=builtin_tools())
    try:
        fake_llm.calls(call("prometheus_query", {"query": "up"}, "c_up")).reply("db-1 is up.")
        result = await app.service.handle(TurnRequest(platform="slack", channel="C1", thread="t1", text="up?",
                                                      agent="metrics", user="U1"))
        assert result.answer == "db-1 is up."
        request = fake_llm.requests[1]
        assert controls(request) == []  # the whole request body the model server received
        seen = tool_messages(request)[0]["content"]
        # the sequences are gone whole (not "]0;title" left over), the printable text around them stays
        assert 'up{instance="db-1:9100link' in seen and 'job="node"}  1' in seen, seen
        assert "title" not in seen and "evil.example" not in seen
        await audited_without_controls(app, result.session_id)
    finally:
        await app.close()
        site.stop()


async def test_an_mcp_tools_result_reaches_the_model_without_control_characters(
        db_url: str, tmp_path: Path, fake_llm: FakeOpenAI):
    agents = tmp_path / "agents"
    write_agent(agents, "ops", f"description: ops\ntools: [current_time]\nmcp:{stdio_server('[echo]')}")
    app = await build_app(make_settings(db_url, fake_llm, agents, default_agent="ops", **FAST), registry=registry())
    try:
        fake_llm.calls(call("ops__echo", {"text": f"tail\t{HOSTILE}\nnext"}, "c_echo")).reply("echoed")
        result = await app.service.handle(TurnRequest(platform="test", channel="c1", thread="t1", text="echo",
                                                      agent="ops"))
        assert result.answer == "echoed"
        seen = tool_messages(fake_llm.requests[1])[0]["content"]
        assert controls(seen) == [] and seen.startswith("echo: tail\tdb-1:9100link") and seen.endswith("\nnext")
        await audited_without_controls(app, result.session_id)
    finally:
        await app.close()
