"""Turn hooks: the one way what happens in a turn reaches the outside (openai-agents' RunHooks, nanobot's
CompositeHook). The SQL recorder, the metrics and the console's live view are each one TurnHooks; the
loop and the service call them and know nothing of SQL, Prometheus or terminals."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bot.engine.context.attachments import AttachmentRecord
from bot.engine.messages import GuardEvent, Message, ToolCall, ToolResult, TurnOutcome
from bot.engine.model.wire import ModelAttempt
from bot.engine.run.context import RunContext

log = logging.getLogger(__name__)




class TurnHooks:
    """The events of a turn, in order: started, then messages, model attempts and tool calls (and, in plan
    mode, the plan), then finished (exactly once, also when the turn failed or was cancelled). Every method
    is a no-op here; subclass and override what you need. An exception from a hook fails the turn (the
    recorder's commit failure must), so a hook that only observes should not raise."""

    async def turn_started(self, run: RunContext, text: str) -> None:
        return None

    async def attachments_read(self, run: RunContext, records: tuple[AttachmentRecord, ...]) -> None:
        """The files attached to the message, and what the model was given of each (right after started)."""
        return None

    async def message_appended(self, run: RunContext, message: Message) -> None:
        return None

    async def model_attempt(self, run: RunContext, attempt: ModelAttempt) -> None:
        return None

    async def text_delta(self, run: RunContext, text: str) -> None:
        """A fragment of the model's reply as it streams (only from a streaming model). A failed attempt that
        is retried, or a reply that turns out to call tools, is told by `model_attempt` afterwards."""
        return None

    async def tool_started(self, run: RunContext, call: ToolCall) -> None:
        return None

    async def tool_finished(self, run: RunContext, result: ToolResult) -> None:
        return None

    async def guardrail(self, run: RunContext, event: GuardEvent) -> None:
        """A guardrail rule matched (docs/guardrails.md): its stage, rule, action and a redacted excerpt."""
        return None

    async def plan_made(self, run: RunContext, plan: dict[str, Any]) -> None:
        """A `mode: plan` turn's plan as it ended: steps (text, status, finding, iterations) and replans."""
        return None

    async def plan_step_started(self, run: RunContext, number: int, text: str) -> None:
        """A `mode: plan` step begins (its model attempts and tool calls follow, then `plan_step_finished`)."""
        return None

    async def plan_step_finished(self, run: RunContext, number: int, status: str) -> None:
        """The step ended: `done` or `failed` (a step that ran out of its budget)."""
        return None

    async def turn_finished(self, run: RunContext, outcome: TurnOutcome) -> None:
        return None

    async def turn_parked(self, run: RunContext, approvals: tuple[int, ...]) -> None:
        """The turn stopped to wait for these approval requests (its state is stored: bot/engine/run/parked.py);
        nothing more of it happens in this process unless it is resumed here. Not `turn_finished`: the turn
        row stays open."""
        return None

    async def turn_resumed(self, run: RunContext) -> None:
        """A parked turn goes on, in this process or another (after a decision, or a restart): in place of
        `turn_started`, its events follow, then `turn_finished` (or `turn_parked` again)."""
        return None


class CompositeHooks(TurnHooks):
    """Fans each event out to several hooks, in order. Every hook hears every event: the first exception
    is raised after all of them ran (a failed commit in the recorder still lets the metrics count the turn)."""

    def __init__(self, *hooks: TurnHooks) -> None:
        flat: list[TurnHooks] = []
        for h in hooks:
            flat.extend(h.hooks if isinstance(h, CompositeHooks) else (h,))
        self.hooks: tuple[TurnHooks, ...] = tuple(flat)

    def plus(self, *more: TurnHooks | None) -> CompositeHooks:
        """These hooks, then `more` (a call's own hooks after the app's standing ones)."""
        extra = [h for h in more if h is not None]
        return CompositeHooks(self, *extra) if extra else self

    async def _each(self, event: Callable[[TurnHooks], Awaitable[None]]) -> None:
        first: Exception | None = None
        for hook in self.hooks:
            try:
                await event(hook)
            except Exception as exc:
                if first is not None:
                    log.warning("another turn hook failed too", exc_info=True)
                first = first or exc
        if first is not None:
            raise first

    async def turn_started(self, run: RunContext, text: str) -> None:
        await self._each(lambda h: h.turn_started(run, text))

    async def attachments_read(self, run: RunContext, records: tuple[AttachmentRecord, ...]) -> None:
        await self._each(lambda h: h.attachments_read(run, records))

    async def message_appended(self, run: RunContext, message: Message) -> None:
        await self._each(lambda h: h.message_appended(run, message))

    async def model_attempt(self, run: RunContext, attempt: ModelAttempt) -> None:
        await self._each(lambda h: h.model_attempt(run, attempt))

    async def text_delta(self, run: RunContext, text: str) -> None:
        await self._each(lambda h: h.text_delta(run, text))

    async def tool_started(self, run: RunContext, call: ToolCall) -> None:
        await self._each(lambda h: h.tool_started(run, call))

    async def tool_finished(self, run: RunContext, result: ToolResult) -> None:
        await self._each(lambda h: h.tool_finished(run, result))

    async def guardrail(self, run: RunContext, event: GuardEvent) -> None:
        await self._each(lambda h: h.guardrail(run, event))

    async def plan_made(self, run: RunContext, plan: dict[str, Any]) -> None:
        await self._each(lambda h: h.plan_made(run, plan))

    async def plan_step_started(self, run: RunContext, number: int, text: str) -> None:
        await self._each(lambda h: h.plan_step_started(run, number, text))

    async def plan_step_finished(self, run: RunContext, number: int, status: str) -> None:
        await self._each(lambda h: h.plan_step_finished(run, number, status))

    async def turn_finished(self, run: RunContext, outcome: TurnOutcome) -> None:
        await self._each(lambda h: h.turn_finished(run, outcome))

    async def turn_parked(self, run: RunContext, approvals: tuple[int, ...]) -> None:
        await self._each(lambda h: h.turn_parked(run, approvals))

    async def turn_resumed(self, run: RunContext) -> None:
        await self._each(lambda h: h.turn_resumed(run))
