"""deploy/grafana/yokebot.json against a real Prometheus scraping a real `yokebot run` (in-process, its HTTP
server on a port, /metrics behind YOKEBOT_METRICS_TOKEN), after a few Slack turns (a tool call, a denied tool
call, a model that fails) and an Alertmanager webhook's investigation: every panel's query parses, at least 80%
return data and the rest are named in docs/deploy.md with the event they wait for, every metric the dashboard
names is in /metrics, and Prometheus loads deploy/prometheus/yokebot-rules.yml and evaluates it against those
metrics (two rules pending). One stack, one test: starting it is most of the time.

Skipped without the Prometheus binary, unless YOKEBOT_REQUIRE_PROMETHEUS=1 (then it fails)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.alerts.harness import SLACK_TOKENS, TOKEN, Served, hook, payload, up
from tests.alerts.test_prometheus_e2e import PROMETHEUS, _need_binaries, ready, started
from tests.chat.slack_harness import answered, mention
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, call
from tests.fakes.slack_server import FakeSlack
from tests.helpers import eventually, free_port, write_agent

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = json.loads((ROOT / "deploy" / "grafana" / "yokebot.json").read_text())
RULES = ROOT / "deploy" / "prometheus" / "yokebot-rules.yml"
METRICS_TOKEN = "metrics-token-for-prometheus-0123"


def targets() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query in the dashboard."""
    return [(p["title"], t["expr"]) for p in DASHBOARD["panels"] if p["type"] != "row" for t in p["targets"]]


def as_prometheus_sees_it(expr: str) -> str:
    """Grafana's variables as Grafana would send them for this job and a short range."""
    return (expr.replace("$__rate_interval", "20s").replace('job=~"$job"', 'job=~"yokebot"')
            .replace("$__range", "5m"))


@dataclass
class Stack:
    prometheus: str
    metrics: str  # the body of /metrics, read with the token


async def query(base: str, expr: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(f"{base}/api/v1/query", params={"query": expr}) as r:
        return await r.json()


def agents_dir(tmp: Path) -> Path:
    agents = tmp / "agents"
    write_agent(agents, "ops", """
description: on call
tools:
  current_time: {}
  shell:
    roots: [/tmp]
    isolation: preferred
    commands:
      - command: ls
alerts:
  - match: {severity: "~critical|warning"}
    post_to: "slack:#ops-alerts"
mcp:
  probe:
    url: http://127.0.0.1:9/mcp
    tools: [echo]
spend:
  daily_usd: 2
""", body="You are the on-call agent.")
    return agents


@pytest.fixture
async def stack(tmp_path: Path, fake_llm: FakeOpenAI, fake_slack: FakeSlack) -> AsyncIterator[Stack]:
    _need_binaries()
    bot_port, prom_port = free_port(), free_port()
    settings = make_settings(
        f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}", fake_llm, agents_dir(tmp_path), default_agent="ops",
        http_port=bot_port, http_host="127.0.0.1", scheduler_enabled=False, slack_api_url=fake_slack.api_url,
        webhook_token=TOKEN, metrics_token=METRICS_TOKEN, model_max_attempts=2, spend_daily_usd=5.0,
        model_prices={"test-model": {"input": 1.0, "output": 2.0}}, **SLACK_TOKENS)
    (tmp_path / "prom.yml").write_text(f"""
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: [{RULES}]
scrape_configs:
  - job_name: yokebot
    authorization: {{credentials: {METRICS_TOKEN}}}
    static_configs: [{{targets: ["127.0.0.1:{bot_port}"]}}]
""")
    served = Served(settings)
    try:
        with started([PROMETHEUS, f"--config.file={tmp_path / 'prom.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                      f"--web.listen-address=127.0.0.1:{prom_port}"], tmp_path / "prom.log"):
            await up(settings)
            await ready(prom_port, "Prometheus")
            base = f"http://127.0.0.1:{prom_port}"

            async def before() -> bool:  # scraped once before the turns: their counts are increases, not births
                found = await query(base, 'yokebot_model_calls_total{job="yokebot", outcome="error"}')
                return bool(found["data"]["result"])

            await eventually(before, timeout=20, what="a first scrape")
            await some_turns_and_an_alert(settings, fake_llm, fake_slack)

            async def scraped() -> bool:  # every turn counted, and each counter scraped twice (rate needs two)
                found = await query(base, 'sum(yokebot_turns_total{job="yokebot"})')
                counted = found["data"]["result"] and float(found["data"]["result"][0]["value"][1]) >= 4
                if counted:
                    for name in ("yokebot_turns_total", "yokebot_tool_calls_total", "yokebot_adapter_events_total"):
                        twice = await query(base, f'min(count_over_time({name}{{job="yokebot"}}[15s]))')
                        if float(twice["data"]["result"][0]["value"][1]) < 2:
                            return False
                    return True
                return False

            await eventually(scraped, timeout=30, what="Prometheus to scrape the finished turns")
            await eventually(lambda: pending(base), timeout=15, what="the rules evaluated")
            async with aiohttp.ClientSession() as http, http.get(
                    f"http://127.0.0.1:{bot_port}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}) as r:
                assert r.status == 200
                body = await r.text()
            yield Stack(base, body)
    finally:
        await served.stop()


async def pending(base: str) -> set[str]:
    async with aiohttp.ClientSession() as http, http.get(f"{base}/api/v1/alerts") as r:
        alerts = (await r.json())["data"]["alerts"]
    names = {a["labels"]["alertname"] for a in alerts}
    return names if {"YokebotMCPServerDown", "YokebotModelErrors"} <= names else set()


async def some_turns_and_an_alert(settings: Any, fake_llm: FakeOpenAI, fake_slack: FakeSlack) -> None:
    fake_llm.calls(call("current_time", {})).reply("All quiet.")
    ts = fake_slack.next_ts()
    fake_slack.push(mention("how are things?", ts))
    await answered(fake_slack, ts)
    fake_llm.calls(call("shell", {"command": "rm -rf /tmp"})).reply("I may not do that.")
    ts = fake_slack.next_ts()
    fake_slack.push(mention("clean up /tmp", ts))
    await answered(fake_slack, ts)
    fake_llm.reply("The api's 5xx come from a bad deploy; roll it back.")
    status, _ = await hook(settings, "/hooks/alertmanager", payload("alertmanager_firing"))
    assert status == 200
    await eventually(lambda: any("roll it back" in p["text"] for p in fake_slack.posts()), timeout=20,
                     what="the investigation's answer")
    fake_llm.fail(500).fail(500)  # both attempts of the next turn: a model error (its count is waited for)
    fake_slack.push(mention("and now?", fake_slack.next_ts()))


@pytest.mark.slow
async def test_the_dashboard_and_the_rules_against_a_real_prometheus_scraping_a_real_yokebot(stack: Stack):
    results: dict[str, bool] = {}
    for title, expr in targets():
        found = await query(stack.prometheus, as_prometheus_sees_it(expr))
        assert found["status"] == "success", f"{title}: {expr} does not parse: {found.get('error')}"
        results[title] = results.get(title, False) or bool(found["data"]["result"])
    empty = sorted(t for t, has in results.items() if not has)
    share = 1 - len(empty) / len(results)
    assert share >= 0.8, f"only {share:.0%} of the panels show data; empty: {empty}"
    waiting = documented_waits()
    assert set(empty) <= set(waiting), f"panels without data that docs/deploy.md does not explain: {set(empty) - set(waiting)}"
    # what the dashboard names exists in /metrics (HELP/TYPE lines: also families with no sample yet)
    exported = set(re.findall(r"^# TYPE (\w+) ", stack.metrics, flags=re.M))
    for title, expr in targets():
        for name in re.findall(r"\byokebot_\w+", expr):
            base = re.sub(r"_(bucket|count|sum)$", "", name)
            assert name in exported or base in exported or name.removesuffix("_total") in exported, \
                f"{title}: {name} is not in /metrics"
    # the numbers behind a few panels are what happened
    turns = await query(stack.prometheus, 'sum by (trigger, status) (yokebot_turns_total{job="yokebot"})')
    seen = {(r["metric"]["trigger"], r["metric"]["status"]): float(r["value"][1]) for r in turns["data"]["result"]}
    assert seen[("alert", "ok")] == 1 and seen[("mention", "ok")] == 2 and seen[("mention", "error")] == 1
    denied = await query(stack.prometheus, 'yokebot_tool_calls_total{job="yokebot", status="denied"}')
    assert [r["metric"]["tool"] for r in denied["data"]["result"]] == ["shell"]
    cost = await query(stack.prometheus, 'sum(yokebot_model_cost_usd_total{job="yokebot"})')
    tokens = await query(stack.prometheus, 'sum by (kind) (yokebot_model_tokens_total{job="yokebot"})')
    used = {r["metric"]["kind"]: float(r["value"][1]) for r in tokens["data"]["result"]}
    assert float(cost["data"]["result"][0]["value"][1]) == pytest.approx(
        (used["prompt"] * 1.0 + used["completion"] * 2.0) / 1e6)
    spend = await query(stack.prometheus, 'yokebot_spend_ratio{job="yokebot"}')
    assert {r["metric"]["agent"] for r in spend["data"]["result"]} == {"*", "ops"}

    # the alert rules, loaded by the same Prometheus, evaluate on these metrics
    async with aiohttp.ClientSession() as http, http.get(f"{stack.prometheus}/api/v1/rules") as r:
        groups = (await r.json())["data"]["groups"]
    rules = [rule for g in groups for rule in g["rules"]]
    assert len(rules) == 9 and all(rule["health"] == "ok" for rule in rules), rules
    assert {"YokebotMCPServerDown", "YokebotModelErrors"} <= await pending(stack.prometheus)


def documented_waits() -> list[str]:
    """The panel titles docs/deploy.md lists as waiting for an event (bold, in the section that says so)."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    section = text.split("Panels that stay empty until", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^- \*\*(.+?)\*\*", section, flags=re.M)


def test_the_dashboard_is_importable_and_has_the_panels_ops_asked_for():
    """Shape Grafana's import needs (no Grafana here): a datasource variable every query uses, unique ids and
    titles, panels on the 24-column grid without overlaps; and the panels the issue lists, by title."""
    assert DASHBOARD["uid"] == "yokebot-overview" and DASHBOARD["schemaVersion"] >= 36 and DASHBOARD["id"] is None
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    panels = DASHBOARD["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    titles = [p["title"] for p in panels if p["type"] != "row"]
    assert len(set(titles)) == len(titles)
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, f"{p['title']} overlaps another panel"
        cells |= mine
        if p["type"] != "row":
            assert p["datasource"]["uid"] == "${datasource}" and p["targets"], p["title"]
            assert all('job=~"$job"' in t["expr"] for t in p["targets"]), p["title"]
    for wanted in ("Turns by status and trigger", "Turn latency", "Model calls by outcome", "Model error ratio",
                   "Tokens by model and kind", "Estimated cost (USD per hour)", "Spend against the caps",
                   "Tool calls by status", "Tool denials (last hour)", "Inbox depth by state", "Oldest inbox item",
                   "Approvals waiting", "Alert investigations", "MCP servers up", "OTel spans dropped"):
        assert wanted in titles, wanted
