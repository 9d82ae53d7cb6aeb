"""Scheduling fixtures: a bot whose agent has schedules, a recording chat adapter, a fast scheduler."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build_app
from bot.scheduling.service import SchedulerService
from bot.scheduling.setup import build_scheduler
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, Step
from tests.fakes.slack_server import FakeSlack
from tests.helpers import registry, write_agent

REPORTER = """
description: scheduled reporter
tools: [echo, current_time]
max_iterations: 3
schedules:
  - name: tick
    every: 1s
    prompt: Write the status report.
    post_to: slack:#reports
"""


class RecordingAdapter:
    """A chat adapter that only records what is posted (the platform a `post_to` target names)."""

    def __init__(self, platform: str = "slack", fail: bool = False) -> None:
        self.platform = platform
        self.fail = fail
        self.posts: list[tuple[str, str]] = []
        self._ids = itertools.count(1)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def post(self, channel: str, text: str, within: object = None) -> str:
        if self.fail:
            raise RuntimeError("channel_not_found")
        self.posts.append((channel, text))
        return f"{channel}/{next(self._ids)}"


def answer_every_time(fake: FakeOpenAI, text: str = "All systems normal.") -> None:
    fake.handler = lambda body: Step("reply", content=text)



class Harness:
    """Builds apps on one database (a 'restart' is a new app on the same files) and runs schedulers."""

    def __init__(self, db: str, llm: FakeOpenAI, agents: Path) -> None:
        self.db, self.llm, self.agents = db, llm, agents
        self.slack = RecordingAdapter("slack")
        self.apps: list[App] = []
        self.schedulers: list[SchedulerService] = []

    async def app(self, **settings: Any) -> App:
        values: dict[str, Any] = {"schedule_poll_seconds": 0.2, "schedule_misfire_grace_seconds": 30.0}
        values.update(settings)
        app = await build_app(make_settings(self.db, self.llm, self.agents, **values), registry=registry())
        app.notifier.register(self.slack)  # type: ignore[arg-type]
        self.apps.append(app)
        return app

    async def start(self, **settings: Any) -> tuple[App, SchedulerService]:
        app = await self.app(**settings)
        scheduler = await build_scheduler(app)
        await scheduler.start()
        self.schedulers.append(scheduler)
        return app, scheduler

    async def stop(self, scheduler: SchedulerService) -> None:
        await scheduler.stop()
        self.schedulers.remove(scheduler)

    async def close(self) -> None:
        for scheduler in list(self.schedulers):
            await scheduler.stop()
        for app in self.apps:
            await app.close()


@pytest.fixture
def sched_agents(tmp_path: Path) -> Path:
    d = tmp_path / "agents"
    write_agent(d, "reporter", REPORTER, body="You write status reports.")
    return d


@pytest.fixture
async def harness(sqlite_url: str, fake_llm: FakeOpenAI, sched_agents: Path) -> AsyncIterator[Harness]:
    h = Harness(sqlite_url, fake_llm, sched_agents)
    yield h
    await h.close()


@pytest.fixture
def fake_slack(fake_slack: FakeSlack) -> FakeSlack:
    fake_slack.channels["C_REPORTS"] = "reports"
    return fake_slack


