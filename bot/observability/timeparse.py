"""`30d`, `12h`, `2w`, `90m` or an ISO date/time -> an aware UTC datetime."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from bot.engine.errors import YokebotError

UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_SPAN = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")


class BadTime(YokebotError):
    """A duration or date the CLI could not read."""


def parse_span(text: str) -> timedelta:
    match = _SPAN.match(text.lower())
    if match is None:
        raise BadTime(f"{text!r} is not a duration; write a number and a unit, like 30d, 12h, 2w or 90m.")
    return timedelta(**{UNITS[match.group(2)]: int(match.group(1))})


def as_utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything we store is UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """A duration back from now (`7d`), or a point in time (`2025-01-31`, `2025-01-31T08:00`)."""
    now = now or datetime.now(UTC)
    if _SPAN.match(text.lower()):
        return now - parse_span(text)
    try:
        return as_utc(datetime.fromisoformat(text.strip()))
    except ValueError:
        raise BadTime(f"{text!r} is neither a duration (7d, 12h) nor a date (2025-01-31).") from None
