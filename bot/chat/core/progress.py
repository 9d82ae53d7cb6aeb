"""The progress of a turn in chat, written once for every platform: a status line that follows the turn's
steps, and the answer as the model writes it, both throttled to about one platform call a second.

`Progress` is a TurnHooks (the pipeline passes a surface's `hooks` to AgentService.handle). It keeps the
latest state and a background pump shows it through `status(text)` and `stream(partial)` of the reply's
`LiveMessages` (bot/chat/core/live.py); the turn never waits for Slack or Discord (a 429 delays the next edit,
never the model). The surface's `deliver()` calls `close()` and then the final answer is written in place.

Tool steps (`YOKEBOT_PROGRESS_STEPS`, or `progress:` in a profile): `none` shows only "working…";
`compact` one line per step, "`tail_log /var/log/nginx/error.log` ✓ 0.2 s"; `full` adds the first line of
each result (already redacted by the executor). An argument preview that the secret redactor would change
is left out entirely: never "token=[REDACTED]", only the tool's name."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, cast

from bot.engine.messages import ToolCall, ToolResult
from bot.engine.model import ModelAttempt
from bot.engine.run import RunContext, TurnHooks
from bot.engine.spec import ProgressMode
from bot.redact import PATTERNS_ONLY

log = logging.getLogger(__name__)

# what a cut turn's status message becomes after a restart: one note on every platform (Discord reads `_x_` too)
RESTARTED_STATUS = "_I was restarted while working on this; see below_"

THINKING, WORKING, WRITING = "thinking…", "working…", "writing the answer…"
MARKS = {"ok": "✓", "error": "✗", "denied": "✗ denied", "not_posted": "○ not posted"}
PREVIEW_CHARS = 60
CLOSE_GRACE_SECONDS = 3.0  # an edit in flight when the answer is ready may finish, then it is cancelled


class LiveSurface(Protocol):
    """What `Progress` shows a turn through (`LiveMessages`, bot/chat/core/live.py): replace the status text;
    show the answer written so far."""

    async def status(self, text: str) -> None: ...
    async def stream(self, partial: str) -> None: ...


_patterns = PATTERNS_ONLY


def argument_preview(call: ToolCall, redact: Callable[[str], str] = _patterns) -> str:
    """The first string argument on one line, short, for "tail_log /var/log/nginx/error.log". Empty when
    there is none, or when the redactor would hide anything in it."""
    try:
        args: object = json.loads(call.arguments) if call.arguments else {}
    except ValueError:
        return ""
    values: list[object] = list(cast(dict[str, object], args).values()) if isinstance(args, dict) else []
    first = next((v for v in values if isinstance(v, str) and v.strip()), "")
    text = " ".join(str(first).split()).replace("`", "")
    if not text or redact(call.arguments) != call.arguments or redact(text) != text:
        return ""  # anything a secret could hide in: no preview at all, not even a shortened one
    return text if len(text) <= PREVIEW_CHARS else "…" + text[1 - PREVIEW_CHARS:]  # a path's end says most


@dataclass
class Step:
    label: str
    started: float
    mark: str = ""
    seconds: float | None = None
    note: str = ""
    key: tuple[str, str] = ("", "")  # (turn id, call id): a sub-agent's calls have ids of their own
    depth: int = 0  # a sub-agent's call: under its parent's `delegate` line (1, 2, ...)

    def line(self, mode: ProgressMode) -> str:
        indent = "\u2003" * (self.depth - 1) + "↳ " if self.depth else ""
        if self.seconds is None:
            return f"{indent}`{self.label}`…"
        done = f"{indent}`{self.label}` {self.mark} {self.seconds:.1f} s"
        return f"{done} — {self.note}" if mode == "full" and self.note else done


class Progress(TurnHooks):
    """Follows one turn; `close()` before the final answer is written."""

    def __init__(self, surface: LiveSurface, mode: ProgressMode = "compact", interval: float = 1.0,
                 redact: Callable[[str], str] = _patterns, clock: Callable[[], float] = time.monotonic,
                 begin: Callable[[str], Awaitable[None]] | None = None) -> None:
        """`begin(question)`: called once before the first status (Slack names an assistant thread)."""
        self.surface, self.interval, self.redact, self.clock = surface, interval, redact, clock
        self.begin = begin
        self.mode: ProgressMode = mode
        self.steps: list[Step] = []
        self.partial = ""
        self.question = ""
        self.current = THINKING
        self._shown_status = ""
        self._shown_partial = ""
        self._dirty = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()  # no platform call in flight
        self._idle.set()
        self._closed = False

    # --- the turn's events ---------------------------------------------------------------------------
    async def turn_started(self, run: RunContext, text: str) -> None:
        self.mode = run.profile.progress or self.mode
        self.question = text
        self._kick()

    async def text_delta(self, run: RunContext, text: str) -> None:
        self.partial += text
        self.current = WRITING
        self._kick()

    async def model_attempt(self, run: RunContext, attempt: ModelAttempt) -> None:
        calls_tools = attempt.response is not None and bool(attempt.response.message.tool_calls)
        if attempt.error is not None or calls_tools:
            self.partial = ""  # a retry writes again from the start; text next to tool calls is not the answer
            self.current = THINKING
            self._kick()

    async def tool_started(self, run: RunContext, call: ToolCall) -> None:
        label = f"{call.name} {argument_preview(call, self.redact)}".strip()
        d = run.delegation
        step = Step(label, self.clock(), key=(run.turn_id, call.id), depth=d.depth if d is not None else 0)
        self.steps.insert(self._place(run), step)
        self._kick()

    def _place(self, run: RunContext) -> int:
        """Where a new step goes: at the end, or a sub-agent's after its parent's `delegate` line and the steps
        already under it (sub-agents that run at once each keep their own lines together)."""
        d = run.delegation
        if d is None or d.parent_turn is None:
            return len(self.steps)
        parent = next((i for i, s in enumerate(self.steps) if s.key == (d.parent_turn, d.parent_call)), None)
        if parent is None:
            return len(self.steps)
        end = parent + 1
        while end < len(self.steps) and self.steps[end].depth > self.steps[parent].depth:
            end += 1
        return end

    async def tool_finished(self, run: RunContext, result: ToolResult) -> None:
        key = (run.turn_id, result.call_id)
        step = next((s for s in self.steps if s.key == key and s.seconds is None), None) or next(
            (s for s in reversed(self.steps) if s.seconds is None), None)
        if step is not None:
            step.seconds = max(result.duration_ms / 1000, 0.0) or self.clock() - step.started
            step.mark = MARKS.get(result.status, result.status)
            first = next((ln.strip() for ln in result.content.splitlines() if ln.strip()), "")
            step.note = (first[:79] + "…") if len(first) > 80 else first
        self.current = THINKING
        self._kick()

    # --- what is shown ---------------------------------------------------------------------------------
    def status_text(self) -> str:
        if self.mode == "none":
            return WORKING
        lines = [s.line(self.mode) for s in self.steps]
        if not self.steps or self.steps[-1].seconds is not None:
            lines.append(f"_{self.current}_")
        return "\n".join(lines)

    def summary(self) -> str | None:
        """The steps so far (what the status message becomes while the turn waits for an approval), or None:
        nothing to keep."""
        if self.mode == "none" or not self.steps:
            return None
        return "\n".join(s.line(self.mode) for s in self.steps)

    def kept(self) -> str | None:
        """What the status message becomes once the turn has answered: the steps with their results under
        `full`, nothing otherwise (it is deleted: the thread keeps the question and the answer; `trace` keeps
        the steps)."""
        return self.summary() if self.mode == "full" else None

    def _kick(self) -> None:
        if self._closed:
            return
        self._dirty.set()
        if self._pump is None:
            self._pump = asyncio.create_task(self._run_pump(), name="progress-pump")

    async def _run_pump(self) -> None:
        while not self._closed:
            await self._dirty.wait()
            self._dirty.clear()
            self._idle.clear()
            try:
                await self._show()
            finally:
                self._idle.set()
            await asyncio.sleep(self.interval)

    async def _show(self) -> None:
        try:
            if self.begin is not None and not self._shown_status:
                await self.begin(self.question)
            status = self.status_text()
            if status != self._shown_status:
                self._shown_status = status
                await self.surface.status(status)
            if self.partial and self.partial != self._shown_partial:
                self._shown_partial = self.partial
                await self.surface.stream(self.partial)
        except asyncio.CancelledError:
            raise
        except Exception:  # progress is a courtesy: it never fails the turn
            log.warning("could not show the progress of a turn", exc_info=True)

    async def close(self) -> None:
        """Stop showing progress: an edit in flight may finish (briefly), nothing new is sent."""
        self._closed = True
        pump, self._pump = self._pump, None
        if pump is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout=CLOSE_GRACE_SECONDS)
        pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump


@dataclass(frozen=True, slots=True)
class LiveOptions:
    """What a platform's reply surface needs to show progress (from Settings)."""

    mode: ProgressMode = "compact"
    interval: float = 1.0


class _LiveSettings(Protocol):
    progress_live: bool
    progress_steps: ProgressMode
    progress_interval_seconds: float


def live_options(settings: _LiveSettings) -> LiveOptions | None:
    """None: `YOKEBOT_PROGRESS_LIVE=false`, the answer arrives whole (reactions still show the turn)."""
    if not settings.progress_live:
        return None
    return LiveOptions(settings.progress_steps, settings.progress_interval_seconds)
