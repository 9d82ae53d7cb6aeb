"""What a schedule is, and the APScheduler trigger it becomes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from bot.engine.errors import YokebotError
from bot.engine.spec import AgentProfile, ScheduleSpec, parse_cron, parse_every

TICK = timedelta(microseconds=1)


class ScheduleError(YokebotError):
    """A schedule is unknown, or cannot be added, changed or run as asked."""


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything we store is UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Schedule:
    name: str  # `agent/name` when declared in a profile, a plain name when added at run time
    agent: str
    source: str  # profile | runtime
    prompt: str
    cron: str | None = None
    every: str | None = None
    timezone: str = "UTC"
    post_to: str | None = None
    session: str = "per_run"  # per_run | rolling
    enabled: bool = True
    paused: bool = False
    created_at: datetime = datetime(1970, 1, 1, tzinfo=UTC)
    updated_at: datetime = datetime(1970, 1, 1, tzinfo=UTC)

    @property
    def active(self) -> bool:
        return self.enabled and not self.paused

    @property
    def spec(self) -> tuple[object, ...]:
        """What the scheduler acts on; a change here re-creates the job."""
        return (
            self.agent,
            self.cron,
            self.every,
            self.timezone,
            self.prompt,
            self.post_to,
            self.session,
            self.enabled,
        )

    @property
    def when(self) -> str:
        what = f"cron {self.cron}" if self.cron else f"every {self.every}"
        return f"{what} ({self.timezone})" if self.cron else what

    @property
    def state(self) -> str:
        return "paused" if self.paused else "enabled" if self.enabled else "disabled"

    def stamped(self, now: datetime) -> Schedule:
        now = now.replace(microsecond=0)  # whole seconds keep interval arithmetic exact
        return replace(self, created_at=now, updated_at=now)

    @classmethod
    def from_profile(cls, profile: AgentProfile, spec: ScheduleSpec) -> Schedule:
        return cls(
            name=f"{profile.name}/{spec.name}",
            agent=profile.name,
            source="profile",
            prompt=spec.prompt,
            cron=spec.cron,
            every=spec.every,
            timezone=spec.timezone or profile.timezone,
            post_to=spec.post_to,
            session=spec.session,
            enabled=spec.enabled,
        )


def build_trigger(schedule: Schedule) -> BaseTrigger:
    tz = ZoneInfo(schedule.timezone)
    if schedule.cron:
        return CronTrigger(timezone=tz, **parse_cron(schedule.cron))
    seconds = parse_every(schedule.every or "")
    # Anchored at creation: the grid survives restarts, so planned times are the same in every process.
    start = as_utc(schedule.created_at) + timedelta(seconds=seconds)
    return IntervalTrigger(seconds=seconds, start_date=start, timezone=tz)


def repeated_wall_time(schedule: Schedule, planned_at: datetime) -> bool:
    """A cron time on the second pass through an hour the clock was set back over (end of daylight saving):
    that wall-clock time already ran an hour earlier. APScheduler 3 fires both; a daily report must not."""
    return bool(schedule.cron) and as_utc(planned_at).astimezone(ZoneInfo(schedule.timezone)).fold == 1


def _second_pass(trigger: BaseTrigger, at: datetime) -> bool:
    return isinstance(trigger, CronTrigger) and at.astimezone(trigger.timezone).fold == 1


def next_fire(trigger: BaseTrigger, after: datetime) -> datetime | None:
    """The first planned time strictly after `after`, in UTC (a cron time repeated by a DST change once)."""
    found = trigger.get_next_fire_time(None, after + TICK)
    while found is not None and _second_pass(trigger, found):
        # step in UTC: local wall-clock arithmetic drops the fold and lands before `found` again
        found = trigger.get_next_fire_time(None, as_utc(found) + TICK)
    return as_utc(found) if found is not None else None


def fire_times(
    trigger: BaseTrigger, after: datetime, until: datetime, limit: int
) -> tuple[list[datetime], bool]:
    """Planned times in (after, until], at most `limit`; the flag says whether more were left out."""
    times: list[datetime] = []
    at = next_fire(trigger, after)
    while at is not None and at <= until:
        if len(times) == limit:
            return times, True
        times.append(at)
        at = next_fire(trigger, at)
    return times, False
