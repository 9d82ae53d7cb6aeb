"""What `yokebot doctor` reports: one `Check` per thing looked at, with what to fix. Here, not in bot/doctor.py,
because each platform's package checks its own tokens (its manifest's `doctor`)."""

from __future__ import annotations

from dataclasses import dataclass

TIMEOUT_SECONDS = 10.0  # each check's network call


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False  # shown, but does not fail the run


def ok(name: str, detail: str) -> Check:
    return Check(name, True, detail)


def fail(name: str, detail: str, fix: str) -> Check:
    return Check(name, False, detail, fix)


def warn(name: str, detail: str, fix: str) -> Check:
    return Check(name, True, detail, fix, warning=True)


def first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
