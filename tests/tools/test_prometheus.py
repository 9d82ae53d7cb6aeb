"""prometheus_query and prometheus_alerts against a real Prometheus (one per module, scraping itself, with an
alert rule that fires at once), through the real ToolExecutor: what the model reads, what the audit gets."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot.engine.messages import Scope, ToolCall, ToolResult
from bot.engine.run.context import RunContext
from bot.engine.run.executor import ToolExecutor
from bot.engine.spec.profiles import ProfileLoader
from bot.redact import SecretRedactor
from bot.tools import builtin_tools
from tests.fakes.loopback import LoopbackServer
from tests.fakes.prometheus import FIRING_RULE, PrometheusProcess
from tests.helpers import write_agent

_ids = itertools.count(1)


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    with PrometheusProcess.start(tmp_path_factory.mktemp("prom"), rules=FIRING_RULE, wait_for_alerts=True) as p:
        yield p


async def run_tool(tmp: Path, tools: str, name: str, args: dict[str, Any], secrets: tuple[str, ...] = ()
                   ) -> ToolResult:
    agents = tmp / f"agents{next(_ids)}"
    write_agent(agents, "metrics", f"description: metrics\ntools:\n{tools}")
    profile = ProfileLoader(agents, builtin_tools()).load("metrics")
    executor = ToolExecutor(builtin_tools(), redact=SecretRedactor(list(secrets)))
    run = RunContext("s1", "t1", profile, Scope("slack", "C1", "th1", "U1"), "mention")
    return await executor.execute(ToolCall(f"c{next(_ids)}", name, json.dumps(args)), run)


def settings(url: str, extra: str = "") -> str:
    return f"  prometheus_query: {{url: \"{url}\"{extra}}}\n  prometheus_alerts: {{url: \"{url}\"{extra}}}\n"


async def test_an_instant_query_is_summarised_and_the_raw_answer_kept_for_the_audit(prom, tmp_path):
    result = await run_tool(tmp_path, settings(prom.url), "prometheus_query", {"query": "up"})
    assert result.status == "ok", result.content
    lines = result.content.splitlines()
    assert lines[0] == "`up` now: 1 series (highest first)"
    port = prom.url.rsplit(":", 1)[1]
    assert lines[1] == f'1. up{{instance="127.0.0.1:{port}", job="self"}}  1'
    raw = json.loads(result.detail)
    assert raw["status"] == "success" and raw["data"]["resultType"] == "vector"
    assert '"resultType"' not in result.content  # the model reads the summary, not the JSON
    assert result.audit_text.startswith(result.content) and raw["data"]["result"][0]["metric"]["job"] in result.audit_text


async def test_a_range_query_gives_last_min_max_avg_per_series(prom, tmp_path):
    result = await run_tool(tmp_path, settings(prom.url), "prometheus_query",
                            {"query": "prometheus_tsdb_head_series", "range": "2m", "step": "1s"})
    assert result.status == "ok", result.content
    head, first = result.content.splitlines()[:2]
    assert head == "`prometheus_tsdb_head_series` over the last 2m (step 1s): 1 series (sorted by last value, highest first)"
    found = re.match(r"1\. prometheus_tsdb_head_series\{instance=\"[^\"]+\", job=\"self\"\}  last (\S+)  "
                     r"min (\S+)  max (\S+)  avg (\S+)  \((\d+) points\)$", first)
    assert found, first
    last, low, high, avg = (float(found.group(i)) for i in range(1, 5))
    assert low <= avg <= high and low <= last <= high and int(found.group(5)) >= 1
    assert json.loads(result.detail)["data"]["resultType"] == "matrix"


async def test_bad_promql_is_an_error_the_model_can_read(prom, tmp_path):
    result = await run_tool(tmp_path, settings(prom.url), "prometheus_query", {"query": "rate(up[5m]"})
    assert result.status == "error"
    assert result.content.startswith("Error: Prometheus refused the request (bad_data): invalid parameter")
    assert "unclosed left parenthesis" in result.content


async def test_an_empty_result_says_so(prom, tmp_path):
    result = await run_tool(tmp_path, settings(prom.url), "prometheus_query", {"query": "no_such_metric_xyz"})
    assert result.status == "ok"
    assert result.content.startswith("`no_such_metric_xyz` now: no series matched")


async def test_a_large_result_shows_the_top_series_and_says_how_many_were_left_out(prom, tmp_path):
    query = 'count by (__name__)({__name__=~"prometheus_.+"})'
    result = await run_tool(tmp_path, settings(prom.url, ", max_series: 5"), "prometheus_query", {"query": query})
    assert result.status == "ok", result.content
    lines = result.content.splitlines()
    total = int(re.match(r".*: (\d+) series", lines[0]).group(1))
    assert total > 50 and len(lines) == 7
    values = [float(line.rsplit(" ", 1)[1]) for line in lines[1:6]]
    assert values == sorted(values, reverse=True)  # the top ones
    assert lines[6] == (f"[{total - 5} more series not shown; narrow the query with a label matcher, "
                        "sum by (...) or topk()]")
    assert len(json.loads(result.detail)["data"]["result"]) == total  # the audit has them all


async def test_an_answer_over_the_size_cap_is_refused_with_advice(prom, tmp_path):
    result = await run_tool(tmp_path, settings(prom.url, ", max_response_bytes: 1000"), "prometheus_query",
                            {"query": '{__name__=~"prometheus_.+"}'})
    assert result.status == "error"
    assert result.content.startswith("Error: Prometheus answered with more than 1,000 bytes; narrow the query")


async def test_bad_range_and_step_are_explained(prom, tmp_path):
    bad = await run_tool(tmp_path, settings(prom.url), "prometheus_query", {"query": "up", "range": "soon"})
    assert bad.status == "error" and "is not an interval; write a duration like 30s" in bad.content
    long = await run_tool(tmp_path, settings(prom.url), "prometheus_query", {"query": "up", "range": "30d"})
    assert long.content == "Error: range may be at most 7d for this agent"
    alone = await run_tool(tmp_path, settings(prom.url), "prometheus_query", {"query": "up", "step": "1m"})
    assert alone.content.startswith("Error: step only applies to a range query")


async def test_the_firing_alerts_are_listed_most_severe_first(prom, tmp_path):
    result = await run_tool(tmp_path, settings(prom.url), "prometheus_alerts", {})
    assert result.status == "ok", result.content
    lines = result.content.splitlines()
    assert lines[0] == (f"Alerts at {prom.url}: 1 firing, 1 pending (pending not shown; include_pending=true "
                        "lists them):")
    assert re.match(r'1\. firing \[critical\] DiskAlmostFull \{instance="db-1:9100"\} for \d+[smh], value 1: '
                    r"Disk /var on db-1 is 97% full$", lines[1]), lines[1]
    assert len(lines) == 2
    both = await run_tool(tmp_path, settings(prom.url), "prometheus_alerts", {"include_pending": True})
    assert both.content.splitlines()[2].startswith("2. pending [warning] TargetSlow")
    assert {a["labels"]["alertname"] for a in json.loads(both.detail)["data"]["alerts"]} == {"DiskAlmostFull",
                                                                                          "TargetSlow"}


async def test_a_prometheus_that_is_down_or_not_prometheus_is_one_sentence(tmp_path):
    from tests.helpers import free_port

    url = f"http://127.0.0.1:{free_port()}"
    down = await run_tool(tmp_path, settings(url), "prometheus_query", {"query": "up"})
    assert down.status == "error" and down.content.startswith(f"Error: cannot reach Prometheus at {url}")
    app = web.Application()
    app.router.add_get("/api/v1/query", lambda r: web.Response(text="<html>login</html>", content_type="text/html"))
    server = LoopbackServer(app).start()
    try:
        page = await run_tool(tmp_path, settings(server.url), "prometheus_query", {"query": "up"})
    finally:
        server.stop()
    assert page.content == (f"Error: {server.url} answered HTTP 200 without a Prometheus API response; "
                            "check the url setting")


async def test_headers_come_from_the_environment_and_never_reach_the_model_or_the_audit(tmp_path, monkeypatch):
    seen: list[str] = []

    async def query(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        token = request.headers["Authorization"].split()[-1]
        body = {"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"__name__": "echo", "leak": token}, "value": [1, "1"]}]}}
        return web.json_response(body)

    app = web.Application()
    app.router.add_get("/api/v1/query", query)
    server = LoopbackServer(app).start()
    monkeypatch.setenv("PROM_TOKEN_TEST", "s3cr3t-prometheus-token")
    try:
        result = await run_tool(tmp_path, settings(server.url, ', headers: {Authorization: "Bearer ${PROM_TOKEN_TEST}"}'),
                                "prometheus_query", {"query": "echo"})
        monkeypatch.delenv("PROM_TOKEN_TEST")
        missing = await run_tool(tmp_path, settings(server.url, ', headers: {Authorization: "Bearer ${PROM_TOKEN_TEST}"}'),
                                 "prometheus_query", {"query": "echo"})
    finally:
        server.stop()
    assert seen == ["Bearer s3cr3t-prometheus-token"]
    assert result.status == "ok" and "s3cr3t" not in result.audit_text and "[REDACTED]" in result.content
    assert missing.content == ("Error: the Prometheus settings need the environment variable PROM_TOKEN_TEST, "
                               "which is not set")


def test_a_literal_header_value_is_refused_when_the_profile_loads(tmp_path):
    from bot.engine.errors import ProfileError

    write_agent(tmp_path, "m", "description: m\ntools:\n" + settings("http://p:9090", ", headers: {X-Token: abc123}"))
    with pytest.raises(ProfileError, match="must take its value from the environment"):
        ProfileLoader(tmp_path, builtin_tools()).load("m")

