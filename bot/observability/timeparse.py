"""`30d`, `12h`, `2w`, `90m`, `1h30m` or an ISO date/time -> an aware UTC datetime.

Durations follow yokebot's one grammar (`bot.engine.spec.cron.parse_every`, as schedules' `every`): whole
numbers with the units w, d, h, m, s, largest first; `m` is minutes everywhere."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.engine.errors import YokebotError
from bot.engine.spec import parse_every


class BadTime(YokebotError):
    """A duration or date the CLI could not read."""


def parse_span(text: str) -> timedelta:
    try:
        return timedelta(seconds=parse_every(text))
    except ValueError as exc:
        raise BadTime(str(exc)) from None


def is_span(text: str) -> bool:
    try:
        parse_every(text)
    except ValueError:
        return False
    return True


def as_utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything we store is UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """A duration back from now (`7d`, `1h30m`), or a point in time (`2025-01-31`, `2025-01-31T08:00`)."""
    now = now or datetime.now(UTC)
    if is_span(text):
        return now - parse_span(text)
    try:
        return as_utc(datetime.fromisoformat(text.strip()))
    except ValueError:
        raise BadTime(f"{text!r} is neither a duration (7d, 12h, 1h30m) nor a date (2025-01-31).") from None
