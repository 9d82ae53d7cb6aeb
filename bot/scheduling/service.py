"""SchedulerService: leader election, the APScheduler jobs that match the `schedules` table, and
catch-up after downtime (one run per schedule at most, within the grace time; the rest recorded as
missed)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from typing import Any

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobSubmissionEvent
from apscheduler.executors.asyncio import AsyncIOExecutor
from apscheduler.job import Job
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger

from bot.scheduling import jobs
from bot.scheduling.leader import LeaderLock
from bot.scheduling.model import Schedule, as_utc, build_trigger, fire_times, next_fire, utcnow
from bot.scheduling.runs import ScheduleRunner
from bot.scheduling.store import ScheduleStore

log = logging.getLogger(__name__)
DRAIN_SECONDS = 30.0  # on stop, runs in flight get this long to finish and post before they are cancelled
MAX_MISSED_ROWS = 100  # per schedule and catch-up; more are summed up in the last row's error

Spawn = Callable[[Coroutine[Any, Any, Any]], "asyncio.Task[Any]"]


class PlannedTimeExecutor(AsyncIOExecutor):
    """APScheduler 3 does not tell a job which planned time it runs for; this executor passes it as
    `planned_at`, the key of the run's row. Lateness is judged by the runner, which records misses."""

    def __init__(self, spawn: Spawn) -> None:
        super().__init__()
        self._spawn = spawn

    def _do_submit_job(self, job: Job, run_times: list[datetime]) -> None:
        async def run() -> None:
            for planned in run_times:  # one with coalesce
                await job.func(*job.args, planned_at=planned, **job.kwargs)

        def done(task: asyncio.Task[None]) -> None:
            self._pending_futures.discard(task)
            exc = None if task.cancelled() else task.exception()
            if exc is not None:
                self._run_job_error(job.id, exc, exc.__traceback__)
            else:
                self._run_job_success(job.id, [])

        task = self._spawn(run())
        task.add_done_callback(done)
        self._pending_futures.add(task)


class SchedulerService:
    def __init__(
        self,
        store: ScheduleStore,
        runner: ScheduleRunner,
        lock: LeaderLock,
        *,
        poll_seconds: float,
        grace_seconds: float,
        drain_seconds: float = DRAIN_SECONDS,
    ) -> None:
        self.store, self.runner, self.lock = store, runner, lock
        self.poll_seconds, self.grace_seconds, self.drain_seconds = poll_seconds, grace_seconds, drain_seconds
        self.key = jobs.register(runner)
        self.leader = False
        self.scheduled: dict[str, Schedule] = {}
        self._scheduler: AsyncIOScheduler | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stop = asyncio.Event()
        self._watch: asyncio.Task[None] | None = None

    # --- lifecycle ----------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Take the lead now if possible, then keep checking in the background."""
        await self._check()
        self._watch = asyncio.create_task(self._watch_loop(), name="scheduler-leader-watch")

    async def stop(self) -> None:
        self._stop.set()
        if self._watch is not None:
            await self._watch
        await self._drain()
        await self._step_down()
        await self.lock.release()
        jobs.unregister(self.key)

    async def _drain(self) -> None:
        """No new runs; the ones in flight finish (their report posted and recorded) within drain_seconds."""
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.pause()
        tasks = set(self._tasks)
        if tasks:
            log.info("scheduler: waiting up to %.0fs for %d run(s) in flight", self.drain_seconds, len(tasks))
            _, pending = await asyncio.wait(tasks, timeout=self.drain_seconds)
            if pending:
                log.warning("scheduler: %d run(s) did not finish in time and are cancelled", len(pending))

    async def _watch_loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.poll_seconds)
            if not self._stop.is_set():
                await self._check()

    async def _check(self) -> None:
        try:
            if not self.leader:
                if await self.lock.try_acquire():
                    await self._lead()
            elif await self.lock.still_held():
                await self.refresh()
            else:
                log.warning("scheduler: lost the leader lock; standing by")
                await self._step_down()
        except Exception:  # a database hiccup must not end the watch; the next poll tries again
            log.exception("scheduler check failed; trying again in %ss", self.poll_seconds)

    async def _lead(self) -> None:
        log.info("scheduler: this process (%s) is the leader", self.runner.runner)
        abandoned = await self.store.abandon_running(
            "the scheduler process running it stopped before it finished; not retried (its report may or may "
            "not have been posted)"
        )
        if abandoned:
            log.warning(
                "scheduler: marked %d unfinished run(s) of a previous scheduler as abandoned", abandoned
            )
        scheduler = AsyncIOScheduler(
            executors={"default": PlannedTimeExecutor(self._spawn)},
            timezone="UTC",
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        scheduler.add_listener(self._on_skipped, EVENT_JOB_MAX_INSTANCES)
        scheduler.start()
        self._scheduler, self.leader = scheduler, True
        await self.refresh()

    async def _step_down(self) -> None:
        scheduler, self._scheduler = self._scheduler, None
        self.leader = False
        self.scheduled.clear()
        if scheduler is not None and scheduler.running:
            scheduler.remove_all_jobs()
            scheduler.shutdown(wait=False)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- jobs ---------------------------------------------------------------------------------------------
    async def refresh(self) -> None:
        """Match the jobs to the active rows of `schedules` (runtime adds, pauses and removals land here
        within one poll)."""
        if self._scheduler is None:
            return
        wanted = {s.name: s for s in await self.store.all() if s.active}
        for name, current in list(self.scheduled.items()):
            if name not in wanted or wanted[name].spec != current.spec:
                self._scheduler.remove_job(name)
                del self.scheduled[name]
                log.info("scheduler: %s unscheduled", name)
        for name, schedule in wanted.items():
            if name not in self.scheduled:
                await self._schedule(schedule)

    async def _schedule(self, schedule: Schedule) -> None:
        assert self._scheduler is not None
        try:
            trigger = build_trigger(schedule)
        except ValueError as exc:  # validated on the way in; a hand-edited row is the only way here
            log.error("scheduler: %s has an unusable trigger (%s); not scheduled", schedule.name, exc)
            return
        now = utcnow()
        await self._catch_up(schedule, trigger, now)
        first = next_fire(trigger, now)
        self._scheduler.add_job(
            jobs.FIRE,
            trigger=trigger,
            args=[self.key, schedule.name],
            id=schedule.name,
            name=schedule.name,
            next_run_time=first,
            replace_existing=True,
        )
        self.scheduled[schedule.name] = schedule
        log.info(
            "scheduler: %s scheduled (%s), next run %s",
            schedule.name,
            schedule.when,
            first.isoformat() if first else "never",
        )

    async def _catch_up(self, schedule: Schedule, trigger: BaseTrigger, now: datetime) -> None:
        """Planned times passed while no scheduler ran: the latest within grace runs once, the others
        become `missed` rows."""
        last = await self.store.last_planned(schedule.name)
        since = max(as_utc(schedule.updated_at), last) if last else as_utc(schedule.updated_at)
        window_start = max(since, now - timedelta(seconds=self.grace_seconds))
        recent, _ = fire_times(trigger, window_start, now, sys.maxsize)
        catch = recent[-1] if recent else None
        missed, more = fire_times(trigger, since, now, MAX_MISSED_ROWS)
        missed = [t for t in missed if t != catch]
        for i, planned in enumerate(missed):
            reason = "no scheduler was running at its planned time" + (
                f"; one catch-up run at {catch.isoformat()} stood in for it"
                if catch
                else f"; past the {self.grace_seconds:.0f}s grace time, so not caught up"
            )
            if more and i == len(missed) - 1:
                reason += (
                    f" (later planned runs until {now.isoformat()} were missed too, not listed one by one)"
                )
            await self.runner.record_missed(schedule, planned, reason)
        if missed:
            log.warning(
                "scheduler: %s missed %d%s planned run(s) while no scheduler was running",
                schedule.name,
                len(missed),
                "+" if more else "",
            )
        if catch is not None:
            log.info("scheduler: %s catches up the run planned at %s", schedule.name, catch.isoformat())
            self._spawn(self.runner.run(schedule, catch, kind="catch_up"))

    def _on_skipped(self, event: JobSubmissionEvent) -> None:
        """A planned time came while the previous run was still going: recorded, not silently dropped."""

        async def record() -> None:
            schedule = await self.store.get(event.job_id)
            if schedule is None:
                return
            for planned in event.scheduled_run_times:
                await self.runner.record_missed(schedule, planned, "the previous run was still going")

        self._spawn(record())
