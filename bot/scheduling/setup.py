"""Wiring for `yokebot run` and the CLI: profile schedules synced into the table, runner, scheduler."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from bot.chat.core.notifier import AdapterNotifier
from bot.config import Settings
from bot.engine.ports import SessionStore
from bot.engine.service import AgentService
from bot.engine.spec import AgentProfile
from bot.scheduling.leader import LeaderLock, leader_lock
from bot.scheduling.model import Schedule
from bot.scheduling.runs import ScheduleRunCounter, ScheduleRunner
from bot.scheduling.service import SchedulerService
from bot.scheduling.store import ScheduleStore, SyncReport

log = logging.getLogger(__name__)


class SchedulingParts(Protocol):
    """What the scheduler needs of the app (`bot.app.App` has them): scheduling does not import the app."""

    @property
    def settings(self) -> Settings: ...
    @property
    def engine(self) -> AsyncEngine: ...
    @property
    def profiles(self) -> Mapping[str, AgentProfile]: ...
    @property
    def service(self) -> AgentService: ...
    @property
    def store(self) -> SessionStore: ...
    @property
    def notifier(self) -> AdapterNotifier: ...
    @property
    def session_url(self) -> str: ...
    @property
    def metrics(self) -> ScheduleRunCounter | None: ...


def profile_schedules(profiles: Mapping[str, AgentProfile]) -> list[Schedule]:
    return [Schedule.from_profile(p, spec) for p in profiles.values() for spec in p.schedules]


async def synced_store(app: SchedulingParts) -> tuple[ScheduleStore, SyncReport]:
    store = ScheduleStore(app.engine)
    report = await store.sync_profiles(profile_schedules(app.profiles))
    if report.added or report.changed or report.removed:
        log.info("schedules synced from the profiles: %s", report)
    return store, report


def schedule_runner(app: SchedulingParts, store: ScheduleStore) -> ScheduleRunner:
    return ScheduleRunner(
        store,
        app.service,
        app.store,
        app.notifier,
        grace_seconds=app.settings.schedule_misfire_grace_seconds,
        metrics=app.metrics,
    )


async def build_scheduler(app: SchedulingParts, lock: LeaderLock | None = None) -> SchedulerService:
    store, _ = await synced_store(app)
    settings = app.settings
    return SchedulerService(
        store,
        schedule_runner(app, store),
        lock or leader_lock(app.session_url),  # a session lock: on the direct URL behind a pooler
        poll_seconds=settings.schedule_poll_seconds,
        grace_seconds=settings.schedule_misfire_grace_seconds,
        drain_seconds=settings.schedule_drain_seconds,
    )
