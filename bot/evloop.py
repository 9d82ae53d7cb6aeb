"""Which event loop a long-running command (`yokebot run`) and the benchmarks run on: uvloop when it is
installed (the `fast` extra; it has no wheels for Windows) and `YOKEBOT_EVENT_LOOP` does not say
`asyncio`; asyncio's own loop otherwise. Measured in bench/README.md (benchmarks 1, 2 and 5 on both loops)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

T = TypeVar("T")
LoopChoice = Literal["auto", "uvloop", "asyncio"]
ENV = "YOKEBOT_EVENT_LOOP"


def choice(value: str | None = None) -> LoopChoice:
    """The loop asked for: `value`, else YOKEBOT_EVENT_LOOP, else `auto`."""
    raw = (value if value is not None else os.environ.get(ENV, "")).strip().lower() or "auto"
    if raw not in ("auto", "uvloop", "asyncio"):
        raise ValueError(f"{ENV} must be auto, uvloop or asyncio (not {raw!r})")
    return raw  # type: ignore[return-value]


def loop_factory(value: str | None = None) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None for asyncio's default loop. `uvloop` when it is not installed is an
    error (asked for explicitly); `auto` then falls back to asyncio."""
    wanted = choice(value)
    if wanted == "asyncio" or (wanted == "auto" and importlib.util.find_spec("uvloop") is None):
        return None
    import uvloop  # an ImportError here says what to install

    return uvloop.new_event_loop


def name(value: str | None = None) -> str:
    """`uvloop` or `asyncio`: what `run` will use."""
    return "asyncio" if loop_factory(value) is None else "uvloop"


def run(main: Coroutine[Any, Any, T], value: str | None = None) -> T:
    """`asyncio.run(main)` on the chosen loop."""
    with asyncio.Runner(loop_factory=loop_factory(value)) as runner:
        return runner.run(main)
