"""Schedules in AGENT.md are checked when the profile loads: one clear error with file and line."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.engine.errors import ProfileError
from bot.engine.spec.profiles import ProfileLoader
from bot.scheduling.model import Schedule, build_trigger, fire_times
from tests.helpers import registry, write_agent


def load(tmp_path: Path, schedules: str) -> ProfileError | None:
    write_agent(tmp_path, "a", "tools: [echo]\nschedules:\n" + schedules)
    try:
        ProfileLoader(tmp_path, registry()).load("a")
    except ProfileError as exc:
        return exc
    return None


@pytest.mark.parametrize(
    ("schedules", "where", "message"),
    [
        (
            '  - {name: r, cron: "61 * * * *", prompt: p}',
            "schedules.0.cron",
            "minute value '61' is outside 0-59",
        ),
        (
            '  - name: r\n    cron: "0 9 * *"\n    prompt: p',
            "schedules.0.cron",
            "cron '0 9 * *' has 4 fields",
        ),
        (
            "  - name: r\n    every: 15 minutes\n    prompt: p",
            "schedules.0.every",
            "'15 minutes' is not an interval",
        ),
        (
            '  - name: r\n    cron: "0 9 * * mon"\n    every: 1h\n    prompt: p',
            "schedules.0",
            "needs exactly one of cron or every",
        ),
        ("  - name: r\n    prompt: p", "schedules.0", "needs exactly one of cron or every"),
        (
            "  - name: r\n    every: 1h\n    timezone: Mars/Base\n    prompt: p",
            "schedules.0.timezone",
            "unknown timezone 'Mars/Base'",
        ),
        (
            '  - name: r\n    every: 1h\n    post_to: "#ops"\n    prompt: p',
            "schedules.0.post_to",
            "write it as platform:channel",
        ),
        (
            "  - {name: r, every: 1h, prompt: p}\n  - {name: r, every: 2h, prompt: q}",
            "schedules",
            "'r' is used twice",
        ),
        ("  - {name: Bad Name, every: 1h, prompt: p}", "schedules.0.name", "not a valid schedule name"),
    ],
)
def test_a_bad_schedule_fails_the_profile_load_with_a_clear_error(tmp_path, schedules, where, message):
    err = load(tmp_path, schedules)
    assert err is not None and err.path.endswith("a/AGENT.md") and err.line is not None
    assert err.problem.startswith(f"{where}: ") and message in err.problem


def test_crontab_weekday_numbers_mean_what_cron_means(tmp_path):
    assert load(tmp_path, '  - {name: r, cron: "30 8 * * 1-5", timezone: Europe/Berlin, prompt: p}') is None
    # 1-5 is Monday to Friday in crontab (APScheduler 3's own numbering would make it Tuesday to Saturday)
    weekdays = Schedule(
        name="r", agent="a", source="profile", prompt="p", cron="30 8 * * 1-5", timezone="Europe/Berlin"
    )
    times, _ = fire_times(
        build_trigger(weekdays),
        datetime(2026, 3, 1, tzinfo=UTC),  # a Sunday
        datetime(2026, 3, 8, 23, 59, tzinfo=UTC),
        10,
    )
    assert [t.strftime("%a %H:%M") for t in times] == [
        f"{d} 07:30" for d in ("Mon", "Tue", "Wed", "Thu", "Fri")
    ]
    sundays = Schedule(name="s", agent="a", source="profile", prompt="p", cron="0 12 * * 0,7")
    times, _ = fire_times(
        build_trigger(sundays), datetime(2026, 3, 1, 13, tzinfo=UTC), datetime(2026, 3, 16, tzinfo=UTC), 10
    )
    assert [t.strftime("%a %d") for t in times] == ["Sun 08", "Sun 15"]


def test_the_shipped_reporter_schedule_loads_and_is_off_until_it_can_post():
    from bot.tools import builtin_tools

    reporter = ProfileLoader(Path(__file__).parents[2] / "agents", builtin_tools()).load("reporter")
    (morning,) = reporter.schedules
    assert morning.name == "morning-report" and morning.cron == "30 8 * * 1-5"
    assert morning.enabled is False and morning.post_to is None
