"""OpenTelemetry traces out: the real SDK and OTLP/HTTP exporter send to a receiver on 127.0.0.1 that decodes
the protobufs (tests/fakes/otlp_server.py). One span tree per turn, its trace id the turn id, content only
when asked for and redacted, and a collector that is down or stuck costs the turn nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build_app, load_profiles
from bot.approvals.records import Approval
from bot.engine.service import TurnRequest
from bot.observability.otel import FLUSH_SECONDS
from bot.redact import MARK
from tests.conftest import make_settings, rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.fakes.otlp_server import FakeOtlp, Span
from tests.helpers import registry, write_agent

CLIENT, INTERNAL = 3, 1  # span kinds in the protobuf


@pytest.fixture
def otlp() -> Iterator[FakeOtlp]:
    server = FakeOtlp().start()
    yield server
    server.stop()


async def traced_app(tmp_path: Path, fake: FakeOpenAI, agents: Path, otlp: FakeOtlp, **overrides: Any) -> App:
    settings = make_settings(f"sqlite+aiosqlite:///{tmp_path / 'otel.db'}", fake, agents,
                             otel_endpoint=otlp.endpoint, **overrides)
    return await build_app(settings, registry=registry())  # metrics on, as `yokebot run` has them


def req(text: str, **kw: Any) -> TurnRequest:
    return TurnRequest(platform="slack", channel="C042", thread="1700000000.0001", text=text, agent="tester",
                       trigger="mention", user="U_ALICE", **kw)


def by_name(spans: list[Span], name: str) -> list[Span]:
    return [s for s in spans if s.name == name]


async def test_a_turn_is_one_span_tree_whose_trace_id_is_the_turn_id(
    tmp_path: Path, fake_llm: FakeOpenAI, agents_dir: Path, otlp: FakeOtlp
):
    app = await traced_app(tmp_path, fake_llm, agents_dir, otlp)
    fake_llm.calls(call("echo", {"text": "hi"}, "call_echo_1")).reply("Echoed.")
    try:
        result = await app.service.handle(req("please echo hi"))
        (turn,) = await rows(app, "SELECT id, session_id FROM turns")
    finally:
        await app.close()  # flushes
    spans = otlp.wait_for(4)
    (root,) = by_name(spans, "invoke_agent tester")
    assert root.trace_id == result.turn_id == turn.id and root.parent_id == ""
    assert {s.trace_id for s in spans} == {turn.id}  # one id from the thread to the SQL rows to the viewer
    assert root.kind == INTERNAL and root.resource["service.name"] == "yokebot"
    assert {k: root.attributes[k] for k in (
        "gen_ai.operation.name", "gen_ai.agent.name", "gen_ai.conversation.id", "yokebot.platform",
        "yokebot.channel.id", "yokebot.thread.id", "yokebot.trigger", "user.id", "yokebot.turn.status",
        "gen_ai.usage.input_tokens")} == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "tester", "gen_ai.conversation.id":
        turn.session_id, "yokebot.platform": "slack", "yokebot.channel.id": "C042", "yokebot.thread.id":
        "1700000000.0001", "yokebot.trigger": "mention", "user.id": "U_ALICE", "yokebot.turn.status": "ok",
        "gen_ai.usage.input_tokens": result.usage.prompt_tokens}

    chats = sorted(by_name(spans, "chat test-model"), key=lambda s: s.start_ns)
    assert len(chats) == 2 and all(c.parent_id == root.span_id and c.kind == CLIENT for c in chats)
    first = chats[0].attributes
    assert first["gen_ai.operation.name"] == "chat" and first["gen_ai.provider.name"] == "openai"
    assert first["gen_ai.request.model"] == "test-model" and first["gen_ai.response.model"] == "test-model"
    assert first["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert first["gen_ai.usage.output_tokens"] >= 0 and first["yokebot.attempt"] == 1
    assert first["server.address"] == "127.0.0.1"
    # the model server was told each call's own span: its spans would nest under ours
    sent = [h.get("traceparent") or h.get("Traceparent") for h in fake_llm.headers]
    assert sent == [f"00-{turn.id}-{c.span_id}-01" for c in chats]

    (tool,) = by_name(spans, "execute_tool echo")
    assert tool.parent_id == root.span_id and tool.status_code == 0
    assert {k: tool.attributes[k] for k in ("gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.call.id",
                                            "yokebot.tool.status")} == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo", "gen_ai.tool.call.id": "call_echo_1",
        "yokebot.tool.status": "ok"}
    assert chats[0].end_ns <= tool.start_ns <= tool.end_ns <= chats[1].start_ns <= root.end_ns
    # content is off by default: no prompt, answer, argument or result left the process
    for span in spans:
        assert not [k for k in span.attributes if k.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.system_",
                                                               "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"))]
        assert "echo hi" not in json.dumps(span.attributes) and "Echoed" not in json.dumps(span.attributes)


async def test_content_is_exported_only_when_asked_and_redacted_first(
    tmp_path: Path, fake_llm: FakeOpenAI, agents_dir: Path, otlp: FakeOtlp
):
    key = "sk-test-key-123"  # the configured OPENAI_API_KEY: a secret the redactor knows
    pattern = "ghp_" + "A" * 36  # a GitHub token: caught by the redactor's patterns
    app = await traced_app(tmp_path, fake_llm, agents_dir, otlp, otel_capture_content=True)
    fake_llm.calls(call("echo", {"text": f"token {pattern}"}, "call_1")).reply(f"Your key is {key}.")
    try:
        await app.service.handle(req(f"my key is {key}, echo the token {pattern}"))
    finally:
        await app.close()
    spans = otlp.wait_for(4)
    everything = json.dumps([s.attributes for s in spans])
    assert key not in everything and pattern not in everything and MARK in everything
    (root,) = by_name(spans, "invoke_agent tester")
    (question,) = json.loads(root.attributes["gen_ai.input.messages"])
    assert question["role"] == "user" and question["parts"][0]["content"].startswith(f"my key is {MARK}")
    (answer,) = json.loads(root.attributes["gen_ai.output.messages"])
    assert answer["parts"][0]["content"] == f"Your key is {MARK}."
    first, second = sorted(by_name(spans, "chat test-model"), key=lambda s: s.start_ns)
    assert "You are a test agent." in first.attributes["gen_ai.system_instructions"]
    asked = json.loads(first.attributes["gen_ai.output.messages"])[0]
    assert asked["parts"][0]["type"] == "tool_call" and asked["parts"][0]["name"] == "echo"
    assert [m["role"] for m in json.loads(second.attributes["gen_ai.input.messages"])] == ["user", "assistant", "tool"]
    (tool,) = by_name(spans, "execute_tool echo")
    assert MARK in tool.attributes["gen_ai.tool.call.arguments"] and MARK in tool.attributes["gen_ai.tool.call.result"]


async def test_a_failed_attempt_and_a_failing_tool_are_error_spans(
    tmp_path: Path, fake_llm: FakeOpenAI, agents_dir: Path, otlp: FakeOtlp
):
    app = await traced_app(tmp_path, fake_llm, agents_dir, otlp)
    fake_llm.fail(503).calls(call("boom", {"reason": "disk on fire"}, "call_boom")).reply("It broke.")
    try:
        await app.service.handle(req("break it"))
    finally:
        await app.close()
    spans = otlp.wait_for(5)
    failed, retried, last = sorted(by_name(spans, "chat test-model"), key=lambda s: s.start_ns)
    assert failed.status_code == 2 and failed.attributes["error.type"] == "http_503"
    assert failed.attributes["yokebot.attempt"] == 1 and retried.attributes["yokebot.attempt"] == 2
    assert retried.status_code == 0 and last.status_code == 0
    assert "gen_ai.response.model" not in failed.attributes
    (tool,) = by_name(spans, "execute_tool boom")
    assert tool.status_code == 2 and tool.attributes["yokebot.tool.status"] == "error"
    assert tool.attributes["error.type"] == "error"


class Yes:
    async def decide(self, approval: Approval) -> tuple[str, str]:
        return "approved", "U_BOSS"


async def test_an_approval_wait_is_a_child_of_its_tool_call(
    tmp_path: Path, fake_llm: FakeOpenAI, agents_dir: Path, otlp: FakeOtlp
):
    write_agent(agents_dir, "tester", "tools:\n  echo: {approval: {approvers: [U_BOSS]}}\n")
    app = await traced_app(tmp_path, fake_llm, agents_dir, otlp)
    app.profiles.update(load_profiles(app.settings, app.registry))
    assert app.approvals is not None
    app.approvals.register_inline("slack", Yes())  # type: ignore[arg-type]
    fake_llm.calls(call("echo", {"text": "x"}, "call_gated")).reply("Done.")
    try:
        await app.service.handle(req("echo x"))
    finally:
        await app.close()
    spans = otlp.wait_for(1, "approval echo")
    (wait,) = by_name(spans, "approval echo")
    (tool,) = by_name(spans, "execute_tool echo")
    assert wait.parent_id == tool.span_id and wait.trace_id == tool.trace_id
    assert wait.attributes["yokebot.approval.verdict"] == "approved" and wait.attributes["yokebot.approval.by"] == "U_BOSS"
    assert tool.attributes["yokebot.tool.reason"] == "approved by U_BOSS"


async def test_plan_steps_hold_their_own_calls(tmp_path: Path, fake_llm: FakeOpenAI, otlp: FakeOtlp):
    agents = tmp_path / "agents"
    write_agent(agents, "tester", "mode: plan\nmax_iterations: 8\nplan: {max_steps: 2, step_max_iterations: 2}\n"
                                  "tools: [echo]\n")
    app = await traced_app(tmp_path, fake_llm, agents, otlp)
    fake_llm.reply("1. Echo a\n2. Echo b")
    fake_llm.calls(call("echo", {"text": "a"}, "c_a")).reply("a done")
    fake_llm.reply("b done")
    try:
        await app.service.handle(req("do a and b"))
    finally:
        await app.close()
    spans = otlp.wait_for(1, "plan_step 2")
    (root,) = by_name(spans, "invoke_agent tester")
    (one,), (two,) = by_name(spans, "plan_step 1"), by_name(spans, "plan_step 2")
    assert one.parent_id == two.parent_id == root.span_id
    assert one.attributes["yokebot.plan.step.status"] == "done"
    (tool,) = by_name(spans, "execute_tool echo")
    assert tool.parent_id == one.span_id
    parents = sorted((c.start_ns, c.parent_id) for c in by_name(spans, "chat test-model"))
    assert [p for _, p in parents] == [root.span_id, one.span_id, one.span_id, two.span_id]


async def test_a_stuck_collector_costs_the_turn_nothing_and_the_close_is_bounded(
    tmp_path: Path, fake_llm: FakeOpenAI, agents_dir: Path, otlp: FakeOtlp, monkeypatch: pytest.MonkeyPatch
):
    otlp.hang = True  # accepts the connection, never answers
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "10")  # export at once, so the exporter is stuck mid-turn
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "2")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "60")
    settings = make_settings(f"sqlite+aiosqlite:///{tmp_path / 'otel.db'}", fake_llm, agents_dir,
                             otel_endpoint=otlp.endpoint)
    app = await build_app(settings, registry=registry())  # metrics on, as `yokebot run` has them
    fake_llm.reply("warm")
    await app.service.handle(req("warm up"))  # its spans go out and get stuck
    deadline = time.monotonic() + 30
    while otlp.requests == 0:
        assert time.monotonic() < deadline, "the exporter never sent"
        time.sleep(0.05)
    fake_llm.calls(call("echo", {"text": "a"}), call("echo", {"text": "b"}), call("echo", {"text": "c"})).reply("ok")
    started = time.monotonic()
    result = await app.service.handle(req("echo three"))
    took = time.monotonic() - started
    assert result.answer == "ok" and took < 10  # the exporter has been stuck all along (60 s timeout)
    assert app.metrics is not None
    assert app.metrics.value("yokebot_otel_spans_dropped_total", reason="queue_full") >= 3
    assert b"yokebot_otel_spans_dropped_total{reason=\"queue_full\"}" in app.metrics.render()
    started = time.monotonic()
    await app.close()
    assert time.monotonic() - started < FLUSH_SECONDS + 5


async def test_a_refusing_collector_is_counted_as_export_failed(
    tmp_path: Path, fake_llm: FakeOpenAI, agents_dir: Path, otlp: FakeOtlp
):
    otlp.status = 400  # not retried by the exporter
    app = await traced_app(tmp_path, fake_llm, agents_dir, otlp)
    fake_llm.reply("fine")
    try:
        assert (await app.service.handle(req("hello"))).answer == "fine"
    finally:
        tracing = app.tracing
        await app.close()
    assert tracing is not None and tracing.dropped["export_failed"] == 2  # the turn and its model call


async def test_an_mcp_call_over_http_carries_its_tool_spans_traceparent(
    tmp_path: Path, fake_llm: FakeOpenAI, otlp: FakeOtlp, monkeypatch: pytest.MonkeyPatch
):
    from tests.mcp.conftest import FAST, TOKEN, TOKEN_ENV, HttpServer, http_server_entry

    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    seen = tmp_path / "traceparents"
    server = HttpServer(tmp_path, "--traceparent-file", str(seen)).start()
    agents = tmp_path / "agents"
    write_agent(agents, "tester", "tools: [current_time]\nmcp:" + http_server_entry(server.url, "[add]"))
    app = None
    try:
        app = await traced_app(tmp_path, fake_llm, agents, otlp, **FAST)
        before = len(seen.read_text().splitlines())  # connecting and listing happen outside any turn
        fake_llm.calls(call("ops__add", {"a": 2, "b": 40}, "call_add")).reply("42")
        assert (await app.service.handle(req("add 2 and 40"))).answer == "42"
    finally:
        if app is not None:
            await app.close()
        server.stop()
    (tool,) = by_name(otlp.wait_for(1, "execute_tool ops__add"), "execute_tool ops__add")
    during = seen.read_text().splitlines()[before:]
    assert f"00-{tool.trace_id}-{tool.span_id}-01" in during
    assert set(seen.read_text().splitlines()[:before]) == {"-"}  # nothing outside a tool call is traced


def ask_env(tmp_path: Path, fake: FakeOpenAI, endpoint: str) -> dict[str, str]:
    from tests.test_cli import base_env

    env = base_env(tmp_path, fake)
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_SERVICE_NAME="ops-bot",
               OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test",
               OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20otlp-secret-token-9f8e")
    return env


def test_yokebot_ask_flushes_its_spans_before_it_exits(tmp_path: Path, fake_llm: FakeOpenAI, otlp: FakeOtlp):
    from tests.test_cli import ops_agent, yokebot

    logs = ops_agent(tmp_path)
    fake_llm.calls(call("read_file", {"path": "/etc/passwd"}, "call_pw")).reply("Not allowed.")
    out = yokebot("ask", "--json", "read the passwd file", env=ask_env(tmp_path, fake_llm, otlp.endpoint))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    # no waiting here: the process sent its spans before it exited
    spans = list(otlp.spans)
    (root,) = by_name(spans, "invoke_agent ops")
    assert root.resource["service.name"] == "ops-bot" and root.resource["deployment.environment"] == "test"
    assert otlp.headers[0]["Authorization"] == "Bearer otlp-secret-token-9f8e"  # OTEL_EXPORTER_OTLP_HEADERS
    (tool,) = by_name(spans, "execute_tool read_file")
    assert tool.status_code == 2 and tool.attributes["yokebot.tool.status"] == "denied"
    assert "outside the allowed paths" in tool.attributes["yokebot.tool.reason"]  # the sandbox's reason
    assert str(logs) not in json.dumps(tool.attributes)
    import sqlite3

    with sqlite3.connect(tmp_path / "cli.db") as db:
        (turn_id,) = db.execute("SELECT id FROM turns WHERE session_id = ?", (data["session_id"],)).fetchone()
    assert root.trace_id == turn_id


def test_yokebot_ask_answers_when_the_collector_is_down(tmp_path: Path, fake_llm: FakeOpenAI):
    from tests.helpers import free_port
    from tests.test_cli import ops_agent, yokebot

    ops_agent(tmp_path)
    fake_llm.reply("Here.")
    started = time.monotonic()
    out = yokebot("ask", "hello", env=ask_env(tmp_path, fake_llm, f"http://127.0.0.1:{free_port()}"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Here."
    assert time.monotonic() - started < FLUSH_SECONDS + 20  # start-up, the turn, and the bounded flush
    assert "otlp-secret-token" not in out.stderr


def test_without_an_endpoint_opentelemetry_is_not_even_imported(tmp_path: Path):
    from tests.test_startup_imports import loaded_after

    db = tmp_path / "y.db"
    statement = (
        "import asyncio, os\n"
        "os.environ.update(OPENAI_API_KEY='sk-test', OPENAI_BASE_URL='http://127.0.0.1:9/v1')\n"
        "from bot.app import build_app\nfrom bot.config import Settings\n"
        f"s = Settings(_env_file=None, database_url='sqlite+aiosqlite:///{db}')\n"
        "async def main():\n    app = await build_app(s, metrics=False)\n    await app.close()\n"
        "asyncio.run(main())"
    )
    assert loaded_after(statement, ("opentelemetry", "google.protobuf")) == []


async def test_a_compaction_is_a_span_holding_its_summary_call(tmp_path: Path, fake_llm: FakeOpenAI, otlp: FakeOtlp):
    from tests.engine.test_context import dump, thread_model
    from tests.engine.test_context import req as console_req

    agents = tmp_path / "agents"
    write_agent(agents, "long", "tools: [dump]\nmax_iterations: 4\ncontext_window: 16000")
    settings = make_settings(f"sqlite+aiosqlite:///{tmp_path / 'otel.db'}", fake_llm, agents, default_agent="long",
                             otel_endpoint=otlp.endpoint)
    app = await build_app(settings, registry={**registry(), "dump": dump})
    fake_llm.handler = thread_model
    try:
        for n in range(1, 4):
            await app.service.handle(console_req(f"question {n}"))
        fake_llm.enforce_window(4000, "openai")  # the server refuses the long prompt: compact and retry
        result = await app.service.handle(console_req("question 4"))
    finally:
        await app.close()
    spans = [s for s in otlp.wait_for(1, "compaction test-model") if s.trace_id == result.turn_id]
    (root,) = [s for s in spans if s.name == "invoke_agent long"]
    compactions = by_name(spans, "compaction test-model")
    assert compactions and all(c.parent_id == root.span_id for c in compactions)
    summary_calls = [s for s in spans if s.name == "chat test-model" and s.attributes["yokebot.purpose"] == "compaction"]
    assert {s.parent_id for s in summary_calls} <= {c.span_id for c in compactions}
    refused = [s for s in spans if s.name == "chat test-model" and s.status_code == 2]
    assert refused and refused[0].parent_id == root.span_id


SLACK = "xoxb-1234567890-" + "abcdefghijkl"  # the redactor's Slack-token shape
BEARER = "Bearer " + "q8Zt3LwX9pVr2mKc"  # a bearer token anywhere


@pytest.mark.parametrize("content", [False, True], ids=["content_off", "content_on"])
async def test_a_secret_in_a_made_up_tool_name_never_leaves_in_a_span(
    tmp_path: Path, fake_llm: FakeOpenAI, agents_dir: Path, otlp: FakeOtlp, content: bool
):
    """The model may call a tool that does not exist, named (and numbered) with a token it read somewhere: the
    name is a span's name and attributes, the content's tool calls, the approval's; none of it leaves raw."""
    app = await traced_app(tmp_path, fake_llm, agents_dir, otlp, otel_capture_content=content)
    quoted = 'token": "' + "hunter2hunter2"  # JSON-escaped in the content, this shape hides from the redactor
    fake_llm.calls(call(f"deploy-{SLACK}", {"text": "x"}, f"call-{SLACK}"),
                   call(f"Authorization: {BEARER}", {}, "call_2"), call(quoted, {}, "call_3"),
                   call(f"deploy_{SLACK}", {}, "call_4")).reply("No such tools.")
    try:
        result = await app.service.handle(req("deploy it"))
    finally:
        await app.close()
    assert result.answer == "No such tools."
    spans = otlp.wait_for(7)
    sent = b"".join(otlp.bodies)
    assert b"deploy-" in sent and b"Authorization" in sent  # the bytes are readable: the checks below mean something
    for secret in (SLACK, BEARER, BEARER.split()[1], "hunter2hunter2"):
        assert secret.encode() not in sent, secret
    tools = sorted((s for s in spans if s.name.startswith("execute_tool")), key=lambda s: s.start_ns)
    assert [s.name for s in tools] == [f"execute_tool deploy-{MARK}", f"execute_tool Authorization: Bearer {MARK}",
                                       f'execute_tool token": {MARK}', f"execute_tool deploy_{MARK}"]
    assert tools[0].attributes["gen_ai.tool.name"] == f"deploy-{MARK}"
    assert tools[0].attributes["gen_ai.tool.call.id"] == f"call-{MARK}"
    assert all(s.status_code == 2 for s in tools)
    if content:
        first = min(by_name(spans, "chat test-model"), key=lambda s: s.start_ns)
        asked = json.loads(first.attributes["gen_ai.output.messages"])[0]["parts"]
        assert [p["name"] for p in asked] == [f"deploy-{MARK}", f"Authorization: Bearer {MARK}", f'token": {MARK}',
                                              f"deploy_{MARK}"]
        assert [p["id"] for p in asked] == [f"call-{MARK}", "call_2", "call_3", "call_4"]


async def test_every_string_a_span_carries_passes_the_redactor(
    tmp_path: Path, fake_llm: FakeOpenAI, agents_dir: Path, otlp: FakeOtlp, monkeypatch: pytest.MonkeyPatch
):
    """Not only the hooks' spans: one made through the app's provider by any code, with the secret in its name,
    a key and a value, a list, an event and its attributes, a recorded exception, a link, its status, and the
    resource (OTEL_RESOURCE_ATTRIBUTES)."""
    from opentelemetry import trace

    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"deployment.note={SLACK}")
    app = await traced_app(tmp_path, fake_llm, agents_dir, otlp)
    tracing = app.tracing
    assert tracing is not None
    tracer = tracing.provider.get_tracer("elsewhere")
    try:
        with tracer.start_as_current_span("warmup") as first:
            pass
        link = trace.Link(first.get_span_context(), {"why": f"after {BEARER}"})
        span = tracer.start_span(f"lookup {SLACK}", links=[link], attributes={
            "plain": f"x {SLACK}", f"key {SLACK}": 1, "list": ["ok", BEARER], "flag": True, "n": 3})
        span.add_event(f"saw {SLACK}", {"what": BEARER, "count": 2})
        span.record_exception(RuntimeError(f"login failed with {SLACK}"))
        span.set_status(trace.Status(trace.StatusCode.ERROR, f"denied: {BEARER}"))
        span.end()
    finally:
        await app.close()
    spans = otlp.wait_for(1, f"lookup {MARK}")
    sent = b"".join(otlp.bodies)
    assert b"lookup" in sent and b"login failed" in sent
    for secret in (SLACK, BEARER.split()[1]):
        assert secret.encode() not in sent, secret
    (span,) = by_name(spans, f"lookup {MARK}")
    assert span.attributes == {"plain": f"x {MARK}", f"key {MARK}": 1, "list": ["ok", f"Bearer {MARK}"],
                               "flag": True, "n": 3}
    assert span.events[0] == (f"saw {MARK}", {"what": f"Bearer {MARK}", "count": 2})
    assert span.events[1][1]["exception.message"] == f"login failed with {MARK}"
    assert span.status_code == 2 and span.status_message == f"denied: Bearer {MARK}"
    assert span.resource["deployment.note"] == MARK


async def test_an_attribute_is_cut_after_the_redactor_not_before(
    tmp_path: Path, fake_llm: FakeOpenAI, agents_dir: Path, otlp: FakeOtlp, monkeypatch: pytest.MonkeyPatch
):
    """OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: the SDK would cut a value when it is set, and the first half of a key
    is a shape no pattern knows. The limit still holds, on the redacted text."""
    key = "sk-proj-" + "Zq7" * 13  # an OpenAI key's shape: 20 characters or more after the prefix
    half = "sk-proj-" + "Zq7" * 4  # what the SDK's cut would leave: not a key's shape any more, yet half of one
    limit = len(f"use-{half}")
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", str(limit))
    app = await traced_app(tmp_path, fake_llm, agents_dir, otlp)
    fake_llm.calls(call(f"use-{key}", {})).reply("No.")
    try:
        await app.service.handle(req("use the key"))
    finally:
        await app.close()
    spans = otlp.wait_for(1, f"execute_tool use-{MARK}")
    assert half.encode() not in b"".join(otlp.bodies)
    (tool,) = by_name(spans, f"execute_tool use-{MARK}")
    assert tool.attributes["gen_ai.tool.name"] == f"use-{MARK}"
    assert all(len(v) <= limit for s in spans for v in s.attributes.values() if isinstance(v, str))
