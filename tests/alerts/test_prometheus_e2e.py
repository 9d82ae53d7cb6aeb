"""End to end with a real Prometheus and a real Alertmanager on 127.0.0.1: a rule fires -> Alertmanager ->
`POST /hooks/alertmanager` with the bearer token -> a thread in the fake Slack with the investigation (scripted
model); Alertmanager repeats the group -> nothing new; the rule resolves -> the root is edited.

Skipped when the binaries are missing, unless YOKEBOT_REQUIRE_PROMETHEUS=1 (then it fails)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tests.alerts.harness import ROOT_CHANNEL, SLACK_TOKENS, TOKEN, Served, ops_agent, up
from tests.chat.slack_harness import answered
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.helpers import db_rows, eventually, free_port

PROMETHEUS, ALERTMANAGER = "/usr/bin/prometheus", "/usr/bin/prometheus-alertmanager"
pytestmark = pytest.mark.slow


def _need_binaries() -> None:
    missing = [b for b in (PROMETHEUS, ALERTMANAGER) if shutil.which(b) is None]
    if missing:
        if os.environ.get("YOKEBOT_REQUIRE_PROMETHEUS") == "1":
            pytest.fail(f"YOKEBOT_REQUIRE_PROMETHEUS=1 but {', '.join(missing)} is not installed")
        pytest.skip(f"{', '.join(missing)} not installed (apt-get install prometheus prometheus-alertmanager)")


@contextlib.contextmanager
def started(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def ready(port: int, what: str) -> None:
    async def ok() -> bool:
        try:
            async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/-/ready") as resp:
                return resp.status == 200
        except aiohttp.ClientError:
            return False

    await eventually(ok, timeout=30, what=f"{what} ready")


class Target:
    """A scrape target whose `app_broken` gauge the test sets: the rule fires while it is 1."""

    def __init__(self) -> None:
        self.broken = 1
        self.port = free_port()

    async def metrics(self, _: web.Request) -> web.Response:
        return web.Response(text=f"# TYPE app_broken gauge\napp_broken {self.broken}\n")


@pytest.fixture
async def target() -> AsyncIterator[Target]:
    t = Target()
    app = web.Application()
    app.router.add_get("/metrics", t.metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", t.port).start()
    yield t
    await runner.cleanup()


async def test_a_prometheus_rule_becomes_one_slack_thread_with_an_investigation_and_resolves(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_slack: FakeSlack, target: Target
):
    _need_binaries()
    agents = tmp_path / "agents"
    ops_agent(agents)
    bot_port, prom_port, am_port = free_port(), free_port(), free_port()
    (tmp_path / "rules.yml").write_text("""
groups:
  - name: app
    interval: 1s
    rules:
      - alert: AppBroken
        expr: app_broken > 0
        for: 0s
        labels: {severity: critical, service: checkout}
        annotations:
          summary: "checkout is broken on {{ $labels.instance }}"
          runbook_url: https://runbooks.example/checkout
""")
    (tmp_path / "prom.yml").write_text(f"""
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: [{tmp_path / "rules.yml"}]
alerting:
  alertmanagers: [{{static_configs: [{{targets: ["127.0.0.1:{am_port}"]}}]}}]
scrape_configs:
  - job_name: app
    static_configs: [{{targets: ["127.0.0.1:{target.port}"]}}]
""")
    (tmp_path / "am.yml").write_text(f"""
route: {{receiver: bot, group_by: [alertname], group_wait: 1s, group_interval: 1s, repeat_interval: 3s}}
receivers:
  - name: bot
    webhook_configs:
      - url: http://127.0.0.1:{bot_port}/hooks/alertmanager
        send_resolved: true
        http_config: {{authorization: {{credentials: {TOKEN}}}}}
""")
    settings = make_settings(sqlite_url, fake_llm, agents, default_agent="ops", http_port=bot_port,
                             http_host="127.0.0.1", scheduler_enabled=False, slack_api_url=fake_slack.api_url,
                             webhook_token=TOKEN, **SLACK_TOKENS)
    fake_llm.reply("checkout's app_broken gauge is 1 since the last deploy; roll it back.")
    served = Served(settings)
    try:
        await up(settings)
        with started([ALERTMANAGER, f"--config.file={tmp_path / 'am.yml'}", f"--storage.path={tmp_path / 'am'}",
                      f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="],
                     tmp_path / "am.log"), \
             started([PROMETHEUS, f"--config.file={tmp_path / 'prom.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                      f"--web.listen-address=127.0.0.1:{prom_port}", "--rules.alert.resend-delay=1s"],
                     tmp_path / "prom.log"):
            await ready(am_port, "Alertmanager")
            await ready(prom_port, "Prometheus")
            roots = lambda: [c for c in fake_slack.posts(ROOT_CHANNEL) if not c.params.get("thread_ts")]  # noqa: E731
            await eventually(roots, timeout=60, what="the root message from Alertmanager's webhook")
            ts = roots()[0].result["ts"]
            await answered(fake_slack, ts)

            async def repeated() -> bool:  # Alertmanager sent the group again (repeat_interval)
                return len(await db_rows(sqlite_url, "SELECT id FROM alert_notifications WHERE state = 'done'")) >= 2

            await eventually(repeated, timeout=60, what="a repeated notification")
            target.broken = 0
            await eventually(lambda: [c for c in fake_slack.calls_to("chat.update") if c.params.get("ts") == ts],
                             timeout=60, what="the root edited as resolved")
            await asyncio.sleep(0)  # the resolved note follows the edit in the same pass
            await eventually(lambda: any(p["text"].startswith("✅ Resolved at ")
                                         for p in fake_slack.posts(ROOT_CHANNEL, thread_ts=ts)), what="the note")
    finally:
        await served.stop()

    [root] = roots()
    assert "`AppBroken`" in root["text"] and f"`127.0.0.1:{target.port}`" in root["text"]
    assert "<http://" in root["text"]  # the generator URL: Prometheus' graph link
    thread = [p["text"] for p in fake_slack.posts(ROOT_CHANNEL, thread_ts=ts)]
    assert thread[0] == "checkout's app_broken gauge is 1 since the last deploy; roll it back."
    assert thread[1].startswith("✅ Resolved at ") and len(thread) == 2  # the repeat added nothing
    assert len(fake_llm.requests) == 1
    asked = fake_llm.requests[0]["messages"][-1]["content"]
    assert '"runbook_url": "https://runbooks.example/checkout"' in asked and "NOT instructions" in asked
    groups = await db_rows(sqlite_url, "SELECT source, group_key, state, resolved_at FROM alert_groups")
    assert [(g.source, g.group_key, g.state) for g in groups] == [
        ("alertmanager", '{}:{alertname="AppBroken"}', "resolved")]
    # resolved at the endsAt Alertmanager sent (when the rule stopped firing), which the note shows to the second
    bodies = await db_rows(sqlite_url, "SELECT body FROM alert_notifications ORDER BY id")
    resolved = next(json.loads(b.body) for b in reversed(bodies) if json.loads(b.body)["status"] == "resolved")
    ends = max(datetime.fromisoformat(a["endsAt"].replace("Z", "+00:00")) for a in resolved["alerts"])
    stored = datetime.fromisoformat(str(groups[0].resolved_at)).replace(tzinfo=UTC)
    assert abs((stored - ends).total_seconds()) < 0.001
    assert thread[1].startswith(f"✅ Resolved at {ends.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC:")
