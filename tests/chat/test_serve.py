"""`yokebot run` (serve()) with the real adapters against the fake platforms: what only shows when the pieces
run together in one process (scheduled reports through the Slack adapter, Slack and Discord side by side)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from bot.runner import serve
from bot.store.db import create_engine
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, Step
from tests.fakes.slack_server import FakeSlack, eventually
from tests.helpers import write_agent

SLACK_TOKENS = {"slack_bot_token": "xoxb-serve-bot-token", "slack_app_token": "xapp-serve-app-token"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def db_rows(url: str, sql: str) -> list[Any]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return list((await conn.execute(text(sql))).all())
    finally:
        await engine.dispose()


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    server = FakeSlack().start()
    server.channels["C_REPORTS"] = "reports"
    yield server
    server.stop()


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
    finally:
        await served.stop()

    post = fake_slack.posts("C_REPORTS")[0]
    assert post["text"] == "All *systems* normal." and post["_auth"] == "Bearer xoxb-serve-bot-token"
    assert fake_slack.connections == 1  # the same process held the Socket Mode connection
    runs = await db_rows(sqlite_url, "SELECT schedule, kind, status, posted_ref FROM schedule_runs "
                                     "WHERE status = 'ok' ORDER BY planned_at")
    assert runs and (runs[0].schedule, runs[0].kind) == ("reporter/tick", "scheduled")
    assert runs[0].posted_ref == f"slack:C_REPORTS:{post.result['ts']}"
