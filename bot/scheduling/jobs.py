"""What APScheduler calls. Jobs are referenced by a module-level name and plain arguments (a runner key
and a schedule name), never by a bound method or the app, so a job stays serialisable whichever job store
holds it. The runner is looked up here, in a registry keyed by a short id."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime

from bot.scheduling.runs import ScheduleRunner

log = logging.getLogger(__name__)
FIRE = "bot.scheduling.jobs:fire"

_runners: dict[str, ScheduleRunner] = {}


def register(runner: ScheduleRunner) -> str:
    key = uuid.uuid4().hex[:12]
    _runners[key] = runner
    return key


def unregister(key: str) -> None:
    _runners.pop(key, None)


async def fire(runner_key: str, schedule: str, *, planned_at: datetime | None = None) -> None:
    """`planned_at` comes from PlannedTimeExecutor (a default only so APScheduler accepts the job)."""
    runner = _runners.get(runner_key)
    if planned_at is None:
        raise TypeError("fire() needs planned_at; run it with PlannedTimeExecutor")
    if runner is None:
        log.warning("schedule %s fired for a scheduler that has stopped; ignored", schedule)
        return
    await runner.fire(schedule, planned_at)
