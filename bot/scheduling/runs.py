"""One scheduled run: claim (schedule, planned time), run the agent through AgentService with trigger
`schedule`, post the report (or a short failure notice) to `post_to`, record the outcome."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from bot.chat.core.notifier import AdapterNotifier
from bot.engine import replies
from bot.engine.ports import SessionStore
from bot.engine.service import AgentService, TurnRequest
from bot.redact import cut
from bot.scheduling.model import Schedule, as_utc, repeated_wall_time, utcnow
from bot.scheduling.store import ScheduleStore

log = logging.getLogger(__name__)
LOG_REF = "log"  # posted_ref when no chat platform for the target runs in this process


class ScheduleRunCounter(Protocol):
    """`Metrics.schedule_run` (bot/observability/metrics.py): status ok | error | skipped | missed."""

    def schedule_run(self, schedule: str, status: str) -> None: ...


def runner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class ScheduleRunOutcome:
    run_id: int
    status: str  # ok | failed
    text: str  # what was posted: the report, or the failure notice
    session_id: str | None = None
    posted_ref: str | None = None
    error: str | None = None


def failure_notice(schedule: Schedule, error: str) -> str:
    first = error.strip().splitlines()[0] if error.strip() else "unknown error"
    first, was_cut = cut(first, 199)  # redacted before it is cut: the notice is posted and stored
    return replies.schedule_failed(schedule.name, first + ("…" if was_cut else ""))


class ScheduleRunner:
    def __init__(
        self,
        store: ScheduleStore,
        service: AgentService,
        sessions: SessionStore,
        notifier: AdapterNotifier,
        *,
        grace_seconds: float,
        runner: str | None = None,
        metrics: ScheduleRunCounter | None = None,
    ) -> None:
        self.store, self.service, self.sessions, self.notifier = store, service, sessions, notifier
        self.grace_seconds = grace_seconds
        self.runner = runner or runner_id()
        self.metrics = metrics

    def count(self, schedule: str, status: str) -> None:
        if self.metrics is not None:
            self.metrics.schedule_run(schedule, status)

    async def record_missed(self, schedule: Schedule, planned_at: datetime, reason: str) -> None:
        await self.store.record_missed(schedule, planned_at, reason, self.runner)
        self.count(schedule.name, "missed")

    async def fire(self, name: str, planned_at: datetime) -> ScheduleRunOutcome | None:
        """Called by the scheduler at (or after) a planned time."""
        schedule = await self.store.get(name)
        if schedule is None or not schedule.active:
            log.info("schedule %s is gone or no longer active; not running it", name)
            return None
        if repeated_wall_time(schedule, planned_at):
            log.info("schedule %s at %s: the clock went back over this time, which already ran; skipping",
                     name, planned_at.isoformat())
            self.count(name, "skipped")
            return None
        late = (utcnow() - as_utc(planned_at)).total_seconds()
        if late > self.grace_seconds:
            reason = (
                f"the scheduler reached it {late:.0f}s after its planned time, past the "
                f"{self.grace_seconds:.0f}s grace time"
            )
            await self.record_missed(schedule, planned_at, reason)
            log.warning("schedule %s at %s missed: %s", name, planned_at.isoformat(), reason)
            return None
        return await self.run(schedule, planned_at, kind="scheduled")

    async def run(self, schedule: Schedule, planned_at: datetime, kind: str) -> ScheduleRunOutcome | None:
        run_id = await self.store.claim(schedule, planned_at, kind, self.runner)
        if run_id is None:
            log.info(
                "schedule %s at %s has already run (another process?); skipping",
                schedule.name,
                planned_at.isoformat(),
            )
            self.count(schedule.name, "skipped")
            return None
        try:
            outcome = await self._claimed(run_id, schedule, planned_at, kind)
        except BaseException:
            self.count(schedule.name, "error")
            raise
        self.count(schedule.name, "ok" if outcome.status == "ok" else "error")
        return outcome

    async def _claimed(self, run_id: int, schedule: Schedule, planned_at: datetime, kind: str) -> ScheduleRunOutcome:
        log.info("running schedule %s (%s, planned %s)", schedule.name, kind, planned_at.isoformat())
        thread = "rolling" if schedule.session == "rolling" else as_utc(planned_at).isoformat()
        session_id: str | None = None
        try:
            session = await self.sessions.session_for("schedule", schedule.name, thread, schedule.agent)
            session_id = session.id
            result = await self.service.handle(
                TurnRequest(
                    platform="schedule",
                    channel=schedule.name,
                    thread=thread,
                    text=schedule.prompt,
                    agent=schedule.agent,
                    trigger="schedule",
                    user=f"schedule:{schedule.name}",
                    session_id=session_id,
                )
            )
        except asyncio.CancelledError:
            await self.store.finish(
                run_id, "failed", session_id=session_id, error=replies.RUN_STOPPED
            )
            raise
        except Exception as exc:
            log.exception("schedule %s failed", schedule.name)
            return await self._failed(run_id, schedule, session_id, f"{type(exc).__name__}: {exc}")
        if result.error:
            return await self._failed(run_id, schedule, session_id, result.error)
        return await self._succeeded(
            run_id, schedule, session_id, result.answer or "(the agent gave no answer)"
        )

    async def _succeeded(
        self, run_id: int, schedule: Schedule, session_id: str | None, text: str
    ) -> ScheduleRunOutcome:
        try:
            ref = await self.post(schedule, text)
        except Exception as exc:
            error = f"posting to {schedule.post_to} failed: {exc}"
            log.error("schedule %s: %s", schedule.name, error)
            await self.store.finish(run_id, "failed", session_id=session_id, error=error)
            return ScheduleRunOutcome(run_id, "failed", text, session_id, None, error)
        await self.store.finish(run_id, "ok", session_id=session_id, posted_ref=ref)
        return ScheduleRunOutcome(run_id, "ok", text, session_id, ref)

    async def _failed(
        self, run_id: int, schedule: Schedule, session_id: str | None, error: str
    ) -> ScheduleRunOutcome:
        log.warning("schedule %s failed: %s", schedule.name, error)
        notice = failure_notice(schedule, error)
        ref: str | None = None
        try:
            ref = await self.post(schedule, notice)
        except Exception as exc:  # the error row below is what matters; the notice is best effort
            log.error(
                "schedule %s: could not post the failure notice to %s: %s",
                schedule.name,
                schedule.post_to,
                exc,
            )
        await self.store.finish(run_id, "failed", session_id=session_id, posted_ref=ref, error=error)
        return ScheduleRunOutcome(run_id, "failed", notice, session_id, ref, error)

    async def post(self, schedule: Schedule, text: str) -> str:
        target = schedule.post_to
        platform = (target or "").partition(":")[0]
        if target is None or platform not in self.notifier.adapters:
            why = "no post_to is set" if target is None else f"{platform} is not configured in this process"
            log.info("schedule %s (%s; posting to the log):\n%s", schedule.name, why, text)
            return LOG_REF
        return await self.notifier.notify(target, text)
