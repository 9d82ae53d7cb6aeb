"""A whole turn of the shipped ops agent, with its commented metrics block switched on and pointed at a real
Prometheus and a local health endpoint: AgentService -> ReActLoop -> real openai SDK -> scripted model;
prometheus_query, prometheus_alerts and http_check run in parallel through the executor; the audit rows are
read back from SQL (the model read a summary, the row holds the raw answer too)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import web

from bot.app import App, build_app
from bot.engine.messages import DETAIL_MARK
from bot.engine.service import TurnRequest
from bot.engine.spec.profiles import ProfileLoader
from bot.tools import builtin_tools
from tests.conftest import make_settings, rows
from tests.fakes.loopback import LoopbackServer
from tests.fakes.openai_server import FakeOpenAI, call
from tests.fakes.prometheus import FIRING_RULE, PrometheusProcess
from tests.helpers import copy_shipped_ops, tool_messages

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    with PrometheusProcess.start(tmp_path_factory.mktemp("prom"), rules=FIRING_RULE, wait_for_alerts=True) as p:
        yield p


def switch_on_metrics(text: str, prom_url: str, health: str) -> str:
    """The AGENT.md with its commented metrics block uncommented, as a user would do it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  # prometheus_query:"))
    end = next(i for i, line in enumerate(lines) if line.startswith("  #   request_timeout:"))
    for i in range(start, end + 1):
        lines[i] = "  " + lines[i][4:]
    out = "\n".join(lines) + "\n"
    out = out.replace("http://prometheus:9090", prom_url)
    out = out.replace('  headers: {Authorization: "Bearer ${PROMETHEUS_TOKEN}"}', "  headers: {}")
    return out.replace('["https://status.example.com/", "http://10.0.1.20:8000/healthz"]', f'["{health}"]')


@pytest.fixture
async def ops(tmp_path: Path, sqlite_url: str, fake_llm: FakeOpenAI, prom: PrometheusProcess
              ) -> AsyncIterator[tuple[App, str]]:
    app_web = web.Application()
    app_web.router.add_get("/healthz", lambda r: web.Response(text="ok"))
    site = LoopbackServer(app_web).start()
    agents = tmp_path / "agents"
    md = copy_shipped_ops(agents)
    md.write_text(switch_on_metrics(md.read_text(), prom.url, f"{site.url}/healthz"))
    app = await build_app(make_settings(sqlite_url, fake_llm, agents, default_agent="ops"), registry=builtin_tools())
    yield app, site.url
    await app.close()
    site.stop()


async def test_a_turn_queries_metrics_alerts_and_health_and_the_audit_keeps_the_raw_answer(ops, fake_llm, prom):
    app, site = ops
    fake_llm.calls(
        call("prometheus_alerts", {}, "c_alerts"),
        call("prometheus_query", {"query": "up", "range": "1m", "step": "5s"}, "c_up"),
        call("http_check", {"url": f"{site}/healthz", "expect": "ok"}, "c_health"),
        call("http_check", {"url": "http://169.254.169.254/latest/meta-data/"}, "c_meta"),
    )
    fake_llm.reply("DiskAlmostFull is firing on db-1; the target is up and /healthz answers.")

    result = await app.service.handle(TurnRequest(platform="slack", channel="C-team", thread="t1",
                                                  text="what is on fire?", agent="ops", user="U1"))

    assert result.answer.startswith("DiskAlmostFull is firing")
    seen = {m["tool_call_id"]: m["content"] for m in tool_messages(fake_llm.requests[1])}
    assert seen["c_alerts"].splitlines()[1].startswith("1. firing [critical] DiskAlmostFull")
    assert seen["c_up"].startswith("`up` over the last 1m (step 5s): 1 series")
    assert "last 1  min 1  max 1  avg 1" in seen["c_up"] and '"resultType"' not in seen["c_up"]
    assert "expected text 'ok': present" in seen["c_health"]
    assert seen["c_meta"].startswith("Denied by the sandbox: http://169.254.169.254/latest/meta-data/ is not on")
    audit = await rows(app, "SELECT call_id, tool, status, result FROM tool_invocations WHERE session_id = :s "
                       "ORDER BY call_id", s=result.session_id)
    by_id = {a.call_id: a for a in audit}
    assert {a.call_id: a.status for a in audit} == {"c_alerts": "ok", "c_up": "ok", "c_health": "ok",
                                                     "c_meta": "denied"}
    up = by_id["c_up"].result
    summary, raw = up.split(f"\n\n{DETAIL_MARK}\n")
    assert summary == seen["c_up"]  # the row holds what the model read, then the raw answer
    assert json.loads(raw)["data"]["resultType"] == "matrix"
    assert json.loads(by_id["c_alerts"].result.split(f"{DETAIL_MARK}\n")[1])["data"]["alerts"]
    assert by_id["c_health"].result == seen["c_health"]  # no detail: the row is what the model read


async def test_a_gated_prometheus_query_waits_for_approval(tmp_path, prom):
    """approval: marks the tool like any other; with nobody to ask, the call is denied and Prometheus is not asked."""
    from bot.engine.messages import Scope, ToolCall
    from bot.engine.run.context import RunContext
    from bot.engine.run.executor import ToolExecutor
    from tests.helpers import write_agent

    write_agent(tmp_path, "m", f'description: m\ntools:\n  prometheus_query: {{url: "{prom.url}", '
                "approval: {approvers: [U0123456]}}\n")
    profile = ProfileLoader(tmp_path, builtin_tools()).load("m")
    run = RunContext("s", "t", profile, Scope("slack", "C", "th", "U1"), "mention")
    result = await ToolExecutor(builtin_tools()).execute(ToolCall("c1", "prometheus_query", '{"query": "up"}'), run)
    assert result.status == "denied" and "needs a human's approval" in result.content


def test_the_shipped_block_loads_once_uncommented(tmp_path):
    md = copy_shipped_ops(tmp_path)
    md.write_text(switch_on_metrics(md.read_text(), "http://p:9090", "http://h/"))
    assert "# prometheus" not in md.read_text()
    tools = ProfileLoader(tmp_path, builtin_tools()).load("ops").tools
    assert tools["prometheus_query"].url == tools["prometheus_alerts"].url == "http://p:9090"  # type: ignore[attr-defined]
    assert tools["http_check"].allow == ("http://h/",)  # type: ignore[attr-defined]
    shipped = ProfileLoader(REPO / "agents", builtin_tools()).load("ops")
    assert "prometheus_query" not in shipped.tools and "metrics-triage" in [s.name for s in shipped.skills]
