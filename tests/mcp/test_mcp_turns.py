"""MCP tools through whole turns: the real SDK client against the fake MCP server (the SDK's server API) over
stdio and streamable HTTP, the real openai SDK against the scripted model, audit rows in SQL."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import App, build_app, side_effecting
from bot.engine.service import TurnRequest
from tests.conftest import make_settings, rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import eventually, registry, tool_messages, write_agent
from tests.mcp.conftest import FAST, TOKEN, Servers


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
async def ops_bot(tmp_path: Path, fake_llm: FakeOpenAI, servers: Servers) -> AsyncIterator[App]:
    app = await start_bot(tmp_path, fake_llm, servers.entry("[echo, add, leak, crash, hang, pid, env]"))
    yield app
    await app.close()


async def test_tool_call_end_to_end_with_its_audit_row(ops_bot: App, fake_llm: FakeOpenAI):
    fake_llm.calls(call("ops__add", {"a": 2, "b": 40}, "call_1")).reply("2 + 40 = 42")

    result = await ops_bot.service.handle(req("add 2 and 40"))

    assert result.answer == "2 + 40 = 42"
    assert [(r.tool, r.status, r.content) for r in result.tool_calls] == [("ops__add", "ok", "42")]
    first = fake_llm.requests[0]
    assert offered(first) == ["current_time", "ops__add", "ops__crash", "ops__echo", "ops__env", "ops__hang",
                              "ops__leak", "ops__pid"]
    add = next(t["function"] for t in first["tools"] if t["function"]["name"] == "ops__add")
    assert add["description"] == "Add two integers."
    assert add["parameters"]["properties"] == {"a": {"type": "integer"}, "b": {"type": "integer"}}
    assert add["parameters"]["required"] == ["a", "b"]
    assert tool_messages(fake_llm.requests[1])[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "42"}
    audit = await rows(ops_bot, "SELECT tool, arguments, result, status, duration_ms FROM tool_invocations "
                                "WHERE session_id = :s", s=result.session_id)
    assert [(a.tool, json.loads(a.arguments) if isinstance(a.arguments, str) else a.arguments, a.result, a.status)
            for a in audit] == [("ops__add", {"a": 2, "b": 40}, "42", "ok")]
    assert audit[0].duration_ms > 0


async def test_a_tool_not_on_the_list_is_never_offered_nor_run(ops_bot: App, fake_llm: FakeOpenAI):
    fake_llm.calls(call("ops__drop_database", {})).reply("I cannot do that.")

    result = await ops_bot.service.handle(req("drop the database"))

    assert "ops__drop_database" not in offered(fake_llm.requests[0])
    assert result.tool_calls[0].status == "error"
    assert "there is no tool named 'ops__drop_database'" in result.tool_calls[0].content
    assert result.answer == "I cannot do that."


async def test_arguments_that_break_the_schema_are_refused_before_the_server(ops_bot: App, fake_llm: FakeOpenAI):
    fake_llm.calls(call("ops__add", {"a": "two", "b": 1})).reply("oops")
    result = await ops_bot.service.handle(req("add"))
    assert result.tool_calls[0].status == "error"
    assert "invalid arguments for ops__add" in result.tool_calls[0].content
    assert "'two' is not of type 'integer'" in result.tool_calls[0].content


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")  # a zombie is dead


def _parent(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:")), 0)


def _ours(pid: int) -> bool:
    """A process this test process started (at any depth): the other workers' servers are 2 in their own
    namespaces too."""
    me = os.getpid()
    for _ in range(16):
        pid = _parent(pid)
        if pid in (0, 1):
            return False
        if pid == me:
            return True
    return False


def host_pid(inner: int) -> int:
    """The pid, as this test sees it, of our fake server that calls itself `inner` (a stdio server runs in
    its own PID namespace, where it is 2 every time); an HTTP server's pid is already ours."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            cmdline = (status.parent / "cmdline").read_bytes()
        except OSError:
            continue
        nspid = fields.get("NSpid", "").split()
        if (len(nspid) > 1 and int(nspid[-1]) == inner and b"mcp_server.py" in cmdline
                and not cmdline.startswith(b"/usr/bin/bwrap") and pid_alive(int(nspid[0]))
                and _ours(int(nspid[0]))):
            return int(nspid[0])
    return inner


async def server_pid(app: App, fake_llm: FakeOpenAI, thread: str) -> int:
    fake_llm.calls(call("ops__pid", {})).reply("pid")
    result = await app.service.handle(req("pid?", thread))
    assert result.tool_calls[0].status == "ok", result.tool_calls[0].content
    return host_pid(int(result.tool_calls[0].content))


def restart_http(servers: Servers) -> None:
    """An HTTP server is someone else's process: the test plays the supervisor that starts it again."""
    if servers.http is not None:
        servers.http.stop()
        servers.http.start()


async def test_a_crash_mid_call_is_an_observation_and_the_server_comes_back(
        ops_bot: App, fake_llm: FakeOpenAI, servers: Servers):
    before = await server_pid(ops_bot, fake_llm, "p1")
    fake_llm.calls(call("ops__crash", {})).reply("The ops server crashed; I will try later.")

    result = await ops_bot.service.handle(req("crash it"))

    assert result.error is None and result.answer == "The ops server crashed; I will try later."
    crashed = result.tool_calls[0]
    assert crashed.status == "error"
    assert "the MCP server 'ops'" in crashed.content and "during the call" in crashed.content, crashed.content
    audit = await rows(ops_bot, "SELECT tool, status FROM tool_invocations WHERE session_id = :s",
                       s=result.session_id)
    assert [(a.tool, a.status) for a in audit] == [("ops__crash", "error")]
    assert ops_bot.mcp is not None
    await eventually(lambda: ops_bot.mcp.connections["ops"].state == "down", 10, "the server marked down")
    fake_llm.calls(call("ops__echo", {"text": "hi"})).reply("still down")
    down = await ops_bot.service.handle(req("echo", "p3"))
    if down.tool_calls[0].status == "error":  # unless the restart was quicker than this turn
        assert "the MCP server 'ops' is down" in down.tool_calls[0].content
    restart_http(servers)
    await eventually(lambda: ops_bot.mcp.connections["ops"].connects == 2, 20, "the restart")
    after = await server_pid(ops_bot, fake_llm, "p2")
    assert after != before and not pid_alive(before)


async def test_a_hang_past_the_timeout_is_an_observation_and_the_hung_server_is_replaced(
        tmp_path: Path, fake_llm: FakeOpenAI, servers: Servers):
    app = await start_bot(tmp_path, fake_llm, servers.entry("{pid: {}, hang: {timeout: 1}}"))
    try:
        before = await server_pid(app, fake_llm, "p1")
        fake_llm.calls(call("ops__hang", {})).reply("It hung.")
        result = await app.service.handle(req("hang"))
        assert result.answer == "It hung."
        assert (result.tool_calls[0].status, result.tool_calls[0].content) == (
            "error", "Error: ops__hang timed out after 1 s.")
        assert result.tool_calls[0].duration_ms < 3000
        # the hung server answers no health check either: it is given up on (a stdio one is killed)
        await eventually(lambda: app.mcp.connections["ops"].state == "down", 10, "the server marked down")
        restart_http(servers)
        await eventually(lambda: app.mcp.connections["ops"].connects == 2, 30, "the restart")
        assert await eventually(lambda: not pid_alive(before), 10, "the hung process gone")
        assert await server_pid(app, fake_llm, "p2") != before
    finally:
        await app.close()


async def test_secrets_in_a_result_are_redacted_for_the_model_and_the_audit(ops_bot: App, fake_llm: FakeOpenAI):
    fake_llm.calls(call("ops__leak", {})).reply("done")
    result = await ops_bot.service.handle(req("dump the config"))
    content = result.tool_calls[0].content
    assert result.tool_calls[0].status == "ok" and content.endswith("ok")
    for secret in ("hunter2-swordfish", TOKEN, "sk-abcdefghijklmnopqrstuvwxyz012345"):
        assert secret not in content
        assert secret not in json.dumps(fake_llm.requests[1])
    assert "[REDACTED]" in content
    audit = await rows(ops_bot, "SELECT result FROM tool_invocations WHERE session_id = :s", s=result.session_id)
    assert TOKEN not in audit[0].result and "hunter2" not in audit[0].result
    # a stdio server gets the variables it is given and the SDK's few defaults, nothing else of ours
    fake_llm.calls(call("ops__env", {"name": "OPENAI_API_KEY"})).reply("done")
    second = await ops_bot.service.handle(req("env", "t2"))
    assert second.tool_calls[0].content == "<unset>"


async def test_only_tools_the_server_marks_read_only_are_free_of_side_effects(ops_bot: App):
    """The inbox records a side-effecting tool before it runs, and a turn cut short after one is not run again
    (docs/scale-out.md): an MCP tool may change anything unless its server says `readOnlyHint`."""
    await eventually(lambda: "ops__add" in ops_bot.registry, 20, "the MCP tools registered")
    assert not side_effecting(ops_bot.registry, "ops__echo")  # the fake server marks echo read-only
    assert side_effecting(ops_bot.registry, "ops__add") and side_effecting(ops_bot.registry, "ops__crash")
    assert side_effecting(ops_bot.registry, "notify") and not side_effecting(ops_bot.registry, "current_time")
