"""Schedule syntax, pure Python (the engine imports no scheduler): crontab lines and `every` intervals."""

from __future__ import annotations

import re

_CRON_FIELDS: tuple[tuple[str, int, int], ...] = (
    ("second", 0, 59), ("minute", 0, 59), ("hour", 0, 23), ("day", 1, 31), ("month", 1, 12),
    ("day_of_week", 0, 7),
)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_CRON_TOKEN = re.compile(r"^(?:(\*)|([a-z0-9]+)(?:-([a-z0-9]+))?)(?:/(\d+))?$")
_EVERY = re.compile(r"^(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_every(text: str) -> int:
    """`15m`, `1h30m`, `2d`, `2w`, `90s` -> seconds (`m` is minutes). The one duration grammar of yokebot:
    schedules' `every`, and the CLI's `--since`, `--older-than`, `--every`. ValueError otherwise."""
    match = _EVERY.match(text.strip().lower().replace(" ", ""))
    if not text.strip() or match is None:
        raise ValueError(f"{text!r} is not an interval; write a duration like 30s, 15m, 1h30m, 7d or 2w (m is minutes)")
    weeks, days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    total = (((weeks * 7 + days) * 24 + hours) * 60 + minutes) * 60 + seconds
    if total <= 0:
        raise ValueError(f"{text!r} is an empty interval")
    return total


def _cron_value(word: str, name: str, low: int, high: int) -> int:
    names = _MONTHS if name == "month" else _WEEKDAYS if name == "day_of_week" else ()
    if word in names:
        return names.index(word) + (1 if name == "month" else 0)
    if not word.isdigit():
        kind = "a number or a name" if names else "a number"
        raise ValueError(f"{name.replace('_', ' ')} value {word!r} is not {kind}")
    if not low <= int(word) <= high:
        raise ValueError(f"{name.replace('_', ' ')} value {word!r} is outside {low}-{high}")
    return int(word)


def _cron_token(token: str, name: str, low: int, high: int) -> set[int]:
    match = _CRON_TOKEN.match(token)
    if match is None:
        raise ValueError(f"{name.replace('_', ' ')} field: cannot read {token!r}")
    star, first, last, step = match.groups()
    start = low if star else _cron_value(first, name, low, high)
    end = high if star or (step and not last) else _cron_value(last or first, name, low, high)
    if start > end:
        raise ValueError(f"{name.replace('_', ' ')} range {token!r} runs backwards")
    if step is not None and int(step) == 0:
        raise ValueError(f"{name.replace('_', ' ')} step in {token!r} must be at least 1")
    return set(range(start, end + 1, int(step or 1)))


def parse_cron(expr: str) -> dict[str, str]:
    """Standard crontab (`min hour day month weekday`, optionally a leading seconds field) -> one
    string per field. Weekday numbers follow crontab (0 and 7 are Sunday) and come back as names, so no
    scheduler can misread them (APScheduler 3 counts from Monday)."""
    parts = expr.lower().split()
    if len(parts) not in (5, 6):
        raise ValueError(f"cron {expr!r} has {len(parts)} fields; write 5 (minute hour day month weekday) "
                         "or 6 (with a leading seconds field)")
    fields = _CRON_FIELDS if len(parts) == 6 else _CRON_FIELDS[1:]
    out: dict[str, str] = {"second": "0"}
    for part, (name, low, high) in zip(parts, fields, strict=True):
        values: set[int] = set()
        for token in part.split(","):
            values |= _cron_token(token, name, low, high)
        if name == "day_of_week" and part != "*":
            days = {v % 7 for v in values}
            part = ",".join(_WEEKDAYS[d] for d in (1, 2, 3, 4, 5, 6, 0) if d in days)
        out[name] = part
    return out
