"""Schedules and their runs in SQL: the `schedules` table (profile and runtime schedules) and
`schedule_runs`, whose UNIQUE(schedule, planned_at) is the last guard against a double run."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.scheduling.model import Schedule, ScheduleError, as_utc, utcnow
from bot.store.models import ScheduleRow, ScheduleRunRow

SCHED = cast(Table, ScheduleRow.__table__)
RUNS = cast(Table, ScheduleRunRow.__table__)
_FIELDS = [f.name for f in fields(Schedule)]


@dataclass(frozen=True, slots=True)
class ScheduleRunRecord:
    id: int
    schedule: str
    agent: str
    planned_at: datetime
    kind: str
    status: str  # running | ok | failed | missed | abandoned
    started_at: datetime | None
    finished_at: datetime | None
    session_id: str | None
    posted_ref: str | None
    error: str | None
    runner: str | None


@dataclass(frozen=True, slots=True)
class SyncReport:
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{len(self.added)} added, {len(self.changed)} changed, {len(self.removed)} removed"


def _schedule(row: Any) -> Schedule:
    values = {name: getattr(row, name) for name in _FIELDS}
    values["created_at"], values["updated_at"] = as_utc(row.created_at), as_utc(row.updated_at)
    return Schedule(**values)


def _maybe_utc(value: datetime | None) -> datetime | None:
    return as_utc(value) if value is not None else None


def _run(row: Any) -> ScheduleRunRecord:
    return ScheduleRunRecord(
        id=row.id,
        schedule=row.schedule,
        agent=row.agent,
        planned_at=as_utc(row.planned_at),
        kind=row.kind,
        status=row.status,
        started_at=_maybe_utc(row.started_at),
        finished_at=_maybe_utc(row.finished_at),
        session_id=row.session_id,
        posted_ref=row.posted_ref,
        error=row.error,
        runner=row.runner,
    )


def _row_values(schedule: Schedule) -> dict[str, Any]:
    return {name: getattr(schedule, name) for name in _FIELDS}


class ScheduleStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    # --- schedules --------------------------------------------------------------------------------------
    async def all(self) -> list[Schedule]:
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(SCHED).order_by(SCHED.c.name))).all()
        return [_schedule(r) for r in rows]

    async def get(self, name: str) -> Schedule | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(SCHED).where(SCHED.c.name == name))).first()
        return _schedule(row) if row is not None else None

    async def resolve(self, name: str) -> Schedule:
        """Exact name, or a profile schedule's short name when only one agent has it."""
        found = await self.get(name)
        if found is not None:
            return found
        every = await self.all()
        matches = [s for s in every if s.source == "profile" and s.name.split("/", 1)[1] == name]
        if len(matches) == 1:
            return matches[0]
        if matches:
            options = ", ".join(s.name for s in matches)
            raise ScheduleError(f"{name!r} names more than one schedule ({options}); use the full name.")
        known = ", ".join(s.name for s in every) or "none yet"
        raise ScheduleError(
            f"There is no schedule {name!r} (known: {known}); `yokebot schedule list` shows them."
        )

    async def add(self, schedule: Schedule) -> Schedule:
        schedule = schedule.stamped(utcnow())
        try:
            async with self.engine.begin() as conn:
                await conn.execute(insert(SCHED).values(**_row_values(schedule)))
        except IntegrityError:
            raise ScheduleError(
                f"A schedule named {schedule.name!r} already exists; remove it first or pick another name."
            ) from None
        return schedule

    async def remove(self, name: str) -> None:
        schedule = await self.resolve(name)
        if schedule.source == "profile":
            raise ScheduleError(
                f"{schedule.name} is declared in the {schedule.agent} profile (AGENT.md); delete it "
                "there, or pause it with `yokebot schedule pause`."
            )
        async with self.engine.begin() as conn:
            await conn.execute(delete(SCHED).where(SCHED.c.name == schedule.name))

    async def set_paused(self, name: str, paused: bool) -> Schedule:
        schedule = await self.resolve(name)
        now = utcnow().replace(microsecond=0)
        async with self.engine.begin() as conn:
            await conn.execute(
                update(SCHED).where(SCHED.c.name == schedule.name).values(paused=paused, updated_at=now)
            )
        return replace(schedule, paused=paused, updated_at=now)

    async def sync_profiles(self, wanted: list[Schedule]) -> SyncReport:
        """Make the profile rows match the profiles: add, change (keeping `paused`), remove."""
        existing = {s.name: s for s in await self.all() if s.source == "profile"}
        added: list[str] = []
        changed: list[str] = []
        for schedule in wanted:
            old = existing.pop(schedule.name, None)
            if old is None:
                await self._insert_or_update(schedule.stamped(utcnow()))
                added.append(schedule.name)
            elif old.spec != schedule.spec:
                stamped = replace(
                    schedule,
                    created_at=old.created_at,
                    updated_at=utcnow().replace(microsecond=0),
                    paused=old.paused,
                )
                await self._update(stamped)
                changed.append(schedule.name)
        if existing:
            async with self.engine.begin() as conn:
                await conn.execute(delete(SCHED).where(SCHED.c.name.in_(list(existing))))
        return SyncReport(tuple(added), tuple(changed), tuple(existing))

    async def _update(self, schedule: Schedule) -> None:
        values = _row_values(schedule)
        values.pop("created_at")
        async with self.engine.begin() as conn:
            await conn.execute(update(SCHED).where(SCHED.c.name == schedule.name).values(**values))

    async def _insert_or_update(self, schedule: Schedule) -> None:
        try:
            async with self.engine.begin() as conn:
                await conn.execute(insert(SCHED).values(**_row_values(schedule)))
        except IntegrityError:  # another process synced the same profile a moment ago
            await self._update(schedule)

    # --- runs -------------------------------------------------------------------------------------------
    async def claim(self, schedule: Schedule, planned_at: datetime, kind: str, runner: str) -> int | None:
        """Insert the `running` row for (schedule, planned time); None when that run already exists."""
        try:
            async with self.engine.begin() as conn:
                result = await conn.execute(
                    insert(RUNS)
                    .values(
                        schedule=schedule.name,
                        agent=schedule.agent,
                        planned_at=as_utc(planned_at),
                        started_at=utcnow(),
                        status="running",
                        kind=kind,
                        runner=runner,
                    )
                    .returning(RUNS.c.id)
                )
                return int(result.scalar_one())
        except IntegrityError:
            return None

    async def finish(
        self,
        run_id: int,
        status: str,
        *,
        session_id: str | None = None,
        posted_ref: str | None = None,
        error: str | None = None,
    ) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                update(RUNS)
                .where(RUNS.c.id == run_id)
                .values(
                    status=status,
                    finished_at=utcnow(),
                    session_id=session_id,
                    posted_ref=posted_ref,
                    error=error,
                )
            )

    async def record_missed(self, schedule: Schedule, planned_at: datetime, reason: str, runner: str) -> bool:
        try:
            async with self.engine.begin() as conn:
                await conn.execute(
                    insert(RUNS).values(
                        schedule=schedule.name,
                        agent=schedule.agent,
                        planned_at=as_utc(planned_at),
                        status="missed",
                        kind="scheduled",
                        runner=runner,
                        error=reason,
                        finished_at=utcnow(),
                    )
                )
            return True
        except IntegrityError:
            return False

    async def last_planned(self, name: str) -> datetime | None:
        async with self.engine.connect() as conn:
            value = (
                await conn.execute(
                    select(func.max(RUNS.c.planned_at)).where(
                        RUNS.c.schedule == name, RUNS.c.kind != "manual"
                    )
                )
            ).scalar()
        return as_utc(value) if value is not None else None

    async def last_runs(self) -> dict[str, ScheduleRunRecord]:
        latest = select(RUNS.c.schedule, func.max(RUNS.c.id).label("id")).group_by(RUNS.c.schedule).subquery()
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(RUNS).join(latest, RUNS.c.id == latest.c.id))).all()
        return {r.schedule: _run(r) for r in rows}

    async def history(self, name: str, limit: int = 20) -> list[ScheduleRunRecord]:
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    select(RUNS)
                    .where(RUNS.c.schedule == name)
                    .order_by(RUNS.c.planned_at.desc(), RUNS.c.id.desc())
                    .limit(limit)
                )
            ).all()
        return [_run(r) for r in rows]

    async def abandon_running(self, reason: str) -> int:
        """A new leader's first act: scheduled runs left `running` belong to a scheduler that is gone."""
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(RUNS)
                .where(RUNS.c.status == "running", RUNS.c.kind != "manual")
                .values(status="abandoned", error=reason, finished_at=utcnow())
            )
        return result.rowcount or 0
