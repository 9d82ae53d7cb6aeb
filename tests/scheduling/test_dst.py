"""A daily cron in a timezone with daylight saving runs once on the day the clock goes back."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.scheduling.model import Schedule, build_trigger, fire_times, repeated_wall_time


def daily(tz: str) -> Schedule:
    return Schedule(name="r", agent="reporter", source="runtime", prompt="p", cron="30 1 * * *", timezone=tz)


def test_the_repeated_hour_runs_once():
    schedule = daily("America/New_York")
    times, _ = fire_times(build_trigger(schedule), datetime(2024, 11, 2, 12, tzinfo=UTC),
                          datetime(2024, 11, 4, 12, tzinfo=UTC), 10)
    # 01:30 EDT on Nov 3 (05:30Z) runs; 01:30 EST an hour later (06:30Z) would be the same wall time again
    assert times == [datetime(2024, 11, 3, 5, 30, tzinfo=UTC), datetime(2024, 11, 4, 6, 30, tzinfo=UTC)]
    assert repeated_wall_time(schedule, datetime(2024, 11, 3, 6, 30, tzinfo=UTC))
    assert not repeated_wall_time(schedule, datetime(2024, 11, 3, 5, 30, tzinfo=UTC))


def test_intervals_are_not_affected():
    every = Schedule(name="e", agent="a", source="runtime", prompt="p", every="30m", timezone="America/New_York")
    assert not repeated_wall_time(every, datetime(2024, 11, 3, 6, 30, tzinfo=UTC))
