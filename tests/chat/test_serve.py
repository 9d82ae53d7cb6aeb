"""`yokebot run` (serve()) with the real adapters against the fake platforms: what only shows when the pieces
run together in one process (scheduled reports through the Slack adapter, Slack and Discord side by side)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.runner import serve
from tests.chat.ops_agent import nginx_logs, shipped_ops
from tests.chat.slack_harness import OPS, answered, mention
from tests.conftest import make_settings
from tests.fakes.discord_server import GENERAL, OPS_ALERTS, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, Step, call
from tests.fakes.slack_server import FakeSlack
from tests.helpers import db_rows, eventually, free_port, write_agent

SLACK_TOKENS = {"slack_bot_token": "xoxb-serve-bot-token", "slack_app_token": "xapp-serve-app-token"}
DISCORD_TOKEN = "discord-serve-token-0123456789"




async def get(settings: Any, path: str) -> tuple[int, str]:
    async with (aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{settings.http_port}{path}") as resp):
        return resp.status, await resp.text()


def sample(metrics: str, name: str, **labels: str) -> float:
    """The value of one Prometheus sample in /metrics text (0 when absent); labels in any order."""
    for line in metrics.splitlines():
        head, _, value = line.rpartition(" ")
        if head.startswith(name + "{") and all(f'{k}="{v}"' in head for k, v in labels.items()):
            return float(value)
    return 0.0


async def scraped(settings: Any, name: str, **labels: str) -> float:
    return sample((await get(settings, "/metrics"))[1], name, **labels)



@pytest.fixture
def fake_slack(fake_slack: FakeSlack) -> FakeSlack:
    fake_slack.channels["C_REPORTS"] = "reports"
    return fake_slack


class Served:
    """serve() in a task; `stop()` sets its stop event and waits for a clean exit."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.event = asyncio.Event()
        self.task = asyncio.create_task(serve(settings, self.event))

    async def stop(self) -> None:
        self.event.set()
        await asyncio.wait_for(self.task, timeout=15)


async def test_a_scheduled_report_fired_inside_yokebot_run_is_posted_by_the_slack_adapter(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_slack: FakeSlack
):
    agents = tmp_path / "agents"
    write_agent(agents, "reporter", """
description: scheduled reporter
tools: [current_time]
schedules:
  - {name: tick, every: 1s, prompt: "Write the status report.", post_to: "slack:#reports"}
""", body="You write status reports.")
    fake_llm.handler = lambda body: Step("reply", content="All **systems** normal.")
    settings = make_settings(sqlite_url, fake_llm, agents, default_agent="reporter", http_port=free_port(),
                             slack_api_url=fake_slack.api_url, schedule_poll_seconds=0.2, **SLACK_TOKENS)
    served = Served(settings)
    try:
        await eventually(lambda: fake_slack.posts("C_REPORTS"), what="the scheduled report in #reports")
        await eventually(lambda: scraped(settings, "yokebot_schedule_runs_total", schedule="reporter/tick", status="ok"),
                    what="the run counted in /metrics")
    finally:
        await served.stop()

    post = fake_slack.posts("C_REPORTS")[0]
    assert post["text"] == "All *systems* normal." and post["_auth"] == "Bearer xoxb-serve-bot-token"
    assert fake_slack.connections == 1  # the same process held the Socket Mode connection
    runs = await db_rows(sqlite_url, "SELECT schedule, kind, status, posted_ref FROM schedule_runs "
                                     "WHERE status = 'ok' ORDER BY planned_at")
    # every second: a machine busy enough to start it late counts the first as a catch-up run
    assert runs and runs[0].schedule == "reporter/tick" and runs[0].kind in ("scheduled", "catch_up")
    assert runs[0].posted_ref == f"slack:C_REPORTS:{post.result['ts']}"



async def test_slack_and_discord_in_one_process_and_an_alert_from_discord_lands_in_slack(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_slack: FakeSlack, fake_discord: FakeDiscord
):
    agents = tmp_path / "agents"
    shipped_ops(agents, nginx_logs(tmp_path))  # notify: slack:#ops-alerts, as shipped
    settings = make_settings(
        sqlite_url, fake_llm, agents, default_agent="ops", http_port=free_port(), scheduler_enabled=False,
        slack_api_url=fake_slack.api_url, discord_bot_token=DISCORD_TOKEN, discord_api_url=fake_discord.api_url,
        discord_gateway_url=fake_discord.gateway_url, discord_guild_ready_timeout=0.05, **SLACK_TOKENS,
    )
    served = Served(settings)
    try:
        await eventually(lambda: fake_slack.connections == 1 and 2 in fake_discord.ops, what="both connected")
        fake_llm.reply("Slack here: nginx looks quiet.")
        fake_slack.push(mention("anything wrong with nginx?", ts="1800.000100"))
        await answered(fake_slack, "1800.000100")

        fake_llm.calls(call("tail_log", {"path": str(tmp_path / "nginx" / "error.log"), "contains": "502"}))
        fake_llm.calls(call("notify", {"message": "nginx: 3 x 502 from upstream 10.0.0.7 since 10:00"}))
        fake_llm.reply("**Degraded**: 3 x 502 since 10:00. I alerted #ops-alerts on Slack.")
        mid = fake_discord.mention("check the recent nginx error logs; if something's wrong, push it to the team channel")
        await eventually(lambda: fake_discord.reactions, what="the Discord answer")
        ready, readiness = await get(settings, "/readyz")
        _, metrics = await get(settings, "/metrics")
    finally:
        await served.stop()

    assert ready == 200 and json.loads(readiness) == {
        "status": "ready", "database": "ok", "adapters": {"slack": "connected", "discord": "connected"}
    }
    assert sample(metrics, "yokebot_adapter_events_total", platform="slack", kind="mention") == 1
    assert sample(metrics, "yokebot_adapter_events_total", platform="discord", kind="mention") == 1
    assert sample(metrics, "yokebot_tool_calls_total", tool="notify", status="ok") == 1

    assert [p["text"] for p in fake_slack.posts(OPS, thread_ts="1800.000100")] == ["Slack here: nginx looks quiet."]
    assert [p.content for p in fake_discord.posted_in(mid)] == [
        "**Degraded**: 3 x 502 since 10:00. I alerted #ops-alerts on Slack."
    ]
    assert fake_discord.reactions == [(GENERAL, mid, "✅")]
    [alert] = fake_slack.posts("C_OPS_ALERTS")  # posted by the Slack adapter, from a Discord turn
    assert alert["text"] == "nginx: 3 x 502 from upstream 10.0.0.7 since 10:00"
    assert fake_discord.posted_in(OPS_ALERTS) == []
    tools = await db_rows(sqlite_url, "SELECT tool, status, result FROM tool_invocations ORDER BY id")
    assert [(t.tool, t.status) for t in tools] == [("tail_log", "ok"), ("notify", "ok")]
    assert tools[1].result == f"Posted to slack:#ops-alerts (ref slack:C_OPS_ALERTS:{alert.result['ts']})."
    sessions = await db_rows(sqlite_url, "SELECT platform, agent FROM sessions ORDER BY created_at")
    assert [(s.platform, s.agent) for s in sessions] == [("slack", "ops"), ("discord", "ops")]
