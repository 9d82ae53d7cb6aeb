"""Start-up of the MCP servers: a server that is down is no failed start and comes in later; what the model
API would reject is refused at start-up with one sentence; /readyz and /metrics show each server."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bot.engine.errors import ConfigError, ProfileError
from bot.observability.http import add_observability_routes
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import eventually
from tests.mcp.conftest import TOKEN, TOKEN_ENV, HttpServer, http_server_entry, stdio_server
from tests.mcp.test_mcp_turns import offered, req, start_bot


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def get(app, path: str) -> tuple[int, str]:
    http = web.Application()
    add_observability_routes(http, app)
    async with TestClient(TestServer(http)) as client:
        resp = await client.get(path)
        return resp.status, await resp.text()


async def test_a_server_down_at_start_up_is_no_failed_start_and_its_tools_come_later(
        tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    port = unused_port()
    app = await start_bot(tmp_path, fake_llm, http_server_entry(f"http://127.0.0.1:{port}/mcp", "[echo]"))
    server = HttpServer(tmp_path)
    try:
        assert app.mcp is not None and app.mcp.connections["ops"].state == "down"
        status, body = await get(app, "/readyz")
        ready = json.loads(body)
        assert status == 200 and ready["status"] == "ready"  # a down MCP server is information, not unready
        assert ready["mcp"]["ops"]["state"] == "down" and ready["mcp"]["ops"]["transport"] == "http"
        assert "error" not in ready["mcp"]["ops"]  # states, not texts: /readyz is unauthenticated
        assert "ConnectError" in (app.mcp.connections["ops"].error or "")
        status, metrics = await get(app, "/metrics")
        assert 'yokebot_mcp_server_up{server="ops"} 0.0' in metrics

        fake_llm.reply("I have no ops tools right now.")
        result = await app.service.handle(req("echo hi"))
        assert result.error is None and result.answer == "I have no ops tools right now."
        assert offered(fake_llm.requests[0]) == ["current_time"]

        server.port = port
        server.start()
        await eventually(lambda: app.mcp.connections["ops"].state == "up", 20, "the server connected")
        fake_llm.calls(call("ops__echo", {"text": "hi"})).reply("echoed")
        result = await app.service.handle(req("echo hi", "t2"))
        assert [(r.tool, r.status, r.content) for r in result.tool_calls] == [("ops__echo", "ok", "echo: hi")]
        assert "ops__echo" in offered(fake_llm.requests[-2])
        _, metrics = await get(app, "/metrics")
        assert 'yokebot_mcp_server_up{server="ops"} 1.0' in metrics
        assert 'yokebot_mcp_server_tools{server="ops"} 1.0' in metrics
        assert json.loads((await get(app, "/readyz"))[1])["mcp"]["ops"]["state"] == "up"
    finally:
        await app.close()
        server.stop()


async def test_a_schema_the_model_api_would_reject_stops_the_start_with_one_sentence(
        tmp_path: Path, fake_llm: FakeOpenAI):
    with pytest.raises(ConfigError) as err:
        await start_bot(tmp_path, fake_llm, stdio_server("[echo, tag_hosts]", "--bad-schema"))
    assert str(err.value) == ("MCP server 'ops': tool 'tag_hosts' is refused: the array at "
                              "parameters.properties.hosts has no \"items\" schema, which the model API rejects")


async def test_an_allowed_tool_the_server_does_not_offer_stops_the_start(tmp_path: Path, fake_llm: FakeOpenAI):
    with pytest.raises(ConfigError, match=r"tool 'query' is refused: it offers no such tool \(it offers: add, "):
        await start_bot(tmp_path, fake_llm, stdio_server("[echo, query]"))


async def test_a_header_variable_missing_from_the_environment_stops_the_start(
        tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(ConfigError, match=rf"MCP server 'ops' \(header Authorization\) needs the environment "
                                          rf"variable {TOKEN_ENV}, which is not set"):
        await start_bot(tmp_path, fake_llm, http_server_entry("http://127.0.0.1:9/mcp", "[echo]"))


@pytest.mark.parametrize(("entry", "problem"), [
    ("\n  ops:\n    url: http://x/mcp\n    headers: {Authorization: Bearer abc123}\n    tools: [a]",
     "mcp.ops.headers: Value error, header 'Authorization' must take its value from the environment"),
    ("\n  ops:\n    url: http://u:pw@x/mcp\n    tools: [a]", "mcp.ops.url: Value error, the URL carries a password"),
    ("\n  ops:\n    command: x\n    url: http://x/mcp", "give exactly one of command (stdio) or url"),
    ("\n  ops:\n    command: x\n    tools: {a: {timeout: soon}}", "mcp.ops.tools.a.timeout: Input should be a valid number"),
    ("\n  ops:\n    command: x\n    tools: {a: {sandbox: on}}", "mcp.ops.tools.a.sandbox: unknown setting"),
    ("\n  Bad__Name:\n    command: x", "mcp.Bad__Name: not a valid server name"),
    ("\n  ops:\n    command: x\n    tools: [a.b]", "the model name 'ops__a.b' does not fit"),
    ("\n  ops:\n    command: x\n    shell: true", "mcp.ops.shell: unknown key"),
])
def test_bad_mcp_sections_are_refused_with_the_line(tmp_path: Path, entry: str, problem: str):
    from bot.engine.spec.profiles import ProfileLoader
    from tests.helpers import registry, write_agent

    write_agent(tmp_path, "ops", f"description: ops\nmcp:{entry}")
    with pytest.raises(ProfileError) as err:
        ProfileLoader(tmp_path, registry()).load("ops")
    assert problem in str(err.value)
    assert err.value.line is not None and err.value.line >= 3


def test_the_allowed_mcp_tools_are_the_profiles_tools_with_their_settings(tmp_path: Path):
    from bot.engine.spec.profiles import ProfileLoader
    from tests.helpers import registry, write_agent

    write_agent(tmp_path, "ops", "description: ops\ntools: [echo]\nmcp:" + stdio_server("{add: {timeout: 3}, pid: {}}"))
    profile = ProfileLoader(tmp_path, registry()).load("ops")
    assert list(profile.tools) == ["echo", "ops__add", "ops__pid"]
    assert profile.tools["ops__add"].timeout == 3
    assert profile.mcp["ops"].transport == "stdio"


def test_mcp_tools_lists_what_a_server_offers_before_it_is_allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from typer.testing import CliRunner

    from bot.cli import app
    from tests.helpers import write_agent

    write_agent(tmp_path / "agents", "ops", "description: ops\nmcp:" + stdio_server("[echo, query]", "--bad-schema"))
    monkeypatch.setenv("YOKEBOT_AGENTS_DIR", str(tmp_path / "agents"))
    result = CliRunner().invoke(app, ["mcp", "tools", "ops", "ops", "--json"])
    assert result.exit_code == 0, result.output
    listing = json.loads(result.stdout)
    by_name = {t["tool"]: t for t in listing["tools"]}
    assert by_name["echo"]["allowed"] and by_name["echo"]["model_name"] == "ops__echo"
    assert not by_name["drop_database"]["allowed"] and by_name["drop_database"]["description"] == (
        "Drop the production database.")
    assert "no \"items\" schema" in by_name["tag_hosts"]["schema_problem"]
    assert by_name["add"]["input_schema"]["required"] == ["a", "b"]
    assert listing["allowed_not_offered"] == ["query"]

    shown = CliRunner().invoke(app, ["agents", "show", "ops"])
    assert shown.exit_code == 0, shown.output
    assert "tool ops__echo" in shown.stdout and "mcp server ops (stdio:" in shown.stdout

    missing = CliRunner(mix_stderr=False).invoke(app, ["mcp", "tools", "ops", "grafana"])
    assert missing.exit_code == 1
    assert "The agent 'ops' declares no MCP server 'grafana' (it declares: ops)." in " ".join(missing.stderr.split())


async def test_a_server_that_accepts_but_never_answers_does_not_hold_up_the_start(
        tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch):
    import time

    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    with socket.socket() as silent:  # listens (the kernel accepts connections) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
        started = time.monotonic()
        app = await start_bot(tmp_path, fake_llm, http_server_entry(url, "[echo]"), mcp_startup_seconds=1.5)
        try:
            assert time.monotonic() - started < 8
            assert app.mcp is not None and app.mcp.connections["ops"].state == "down"
            assert app.mcp.connections["ops"].error == "TimeoutError"
        finally:
            await app.close()


def test_a_terminal_command_starts_only_its_agents_mcp_servers(tmp_path: Path, fake_llm: FakeOpenAI):
    # `ops` declares a server whose token is not set; asking `plain` must not need it (nor start it)
    from tests.helpers import write_agent
    from tests.test_cli import base_env, yokebot

    agents = tmp_path / "agents"
    write_agent(agents, "ops", "tools: [current_time]\nmcp:" + http_server_entry("http://127.0.0.1:9/mcp", "[echo]"))
    write_agent(agents, "plain", "tools: [current_time]")
    env = {k: v for k, v in base_env(tmp_path, fake_llm).items() if k != TOKEN_ENV}
    fake_llm.reply("hello from plain")
    done = yokebot("ask", "--agent", "plain", "hi", env=env)
    assert done.returncode == 0, done.stderr
    assert "hello from plain" in done.stdout
    refused = yokebot("ask", "--agent", "ops", "hi", env=env)
    assert refused.returncode != 0
    assert f"needs the environment variable {TOKEN_ENV}, which is not set" in refused.stderr
