"""MetricsHooks: the turn hooks that count turns, model attempts and tool calls in Prometheus (when the app
exports metrics: `yokebot run`) and log one line for each (with the turn's session and trace id, from the
log filter)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from bot.engine.messages import GuardEvent, ToolResult, TurnOutcome
from bot.engine.model import ModelAttempt
from bot.engine.run import PriceOf, RunContext, TurnHooks

if TYPE_CHECKING:  # the terminal commands export no metrics and do not import prometheus-client
    from bot.observability.metrics import Metrics

log = logging.getLogger("bot.turns")
UNKNOWN_TOOL = "(unknown)"  # the tool label of a call naming no tool of its agent


class MetricsHooks(TurnHooks):
    def __init__(self, metrics: Metrics | None, price: PriceOf | None = None) -> None:
        self.metrics, self.price = metrics, price  # price: USD per 1M tokens (in, out) of a model, or None
        self._started: dict[str, float] = {}  # turn id -> perf clock

    async def turn_started(self, run: RunContext, text: str) -> None:
        self._started[run.turn_id] = time.perf_counter()
        if self.metrics is not None:
            self.metrics.turns_in_progress.inc()
        log.info("turn started: agent=%s trigger=%s user=%s", run.agent, run.trigger, run.scope.user)

    async def turn_parked(self, run: RunContext, approvals: tuple[int, ...]) -> None:
        """No longer in progress here (it may go on in another process): out of the gauge and the clock."""
        self._started.pop(run.turn_id, None)
        if self.metrics is not None:
            self.metrics.turns_in_progress.dec()

    async def turn_resumed(self, run: RunContext) -> None:
        self._started[run.turn_id] = time.perf_counter()  # its duration: from here (the wait is a human's)
        if self.metrics is not None:
            self.metrics.turns_in_progress.inc()
        log.info("turn resumed: agent=%s trigger=%s", run.agent, run.trigger)

    async def model_attempt(self, run: RunContext, attempt: ModelAttempt) -> None:
        m, model, usage = self.metrics, attempt.model, attempt.usage
        if m is not None:
            m.child(m.model_calls, run.agent, model, "error" if attempt.error else "ok").inc()
            m.child(m.model_seconds, model).observe(attempt.latency_ms / 1000)
            m.child(m.tokens, run.agent, model, "prompt").inc(usage.prompt_tokens)
            m.child(m.tokens, run.agent, model, "completion").inc(usage.completion_tokens)
            per_million = self.price(model) if self.price is not None else None
            if per_million is not None:  # YOKEBOT_MODEL_PRICES: the estimate `yokebot usage` shows, as it happens
                cost = (usage.prompt_tokens * per_million[0] + usage.completion_tokens * per_million[1]) / 1e6
                m.child(m.cost, run.agent, model).inc(cost)
        if attempt.error is not None:
            log.warning("model call failed: model=%s attempt=%d error=%s", model, attempt.attempt,
                        attempt.error.detail or attempt.error)

    async def tool_finished(self, run: RunContext, result: ToolResult) -> None:
        if (m := self.metrics) is not None:
            # a name the agent has no tool of is the model's (what a log line told it to call): one series for all
            # of them, or each would be a series of its own, on every scrape, for as long as the process runs
            tool = result.tool if result.tool in run.profile.tools else UNKNOWN_TOOL
            m.child(m.tool_calls, run.agent, tool, result.status).inc()
            m.child(m.tool_seconds, tool).observe(result.duration_ms / 1000)
        log.info("tool call: tool=%s status=%s attempts=%d ms=%.0f%s", result.tool, result.status,
                 result.attempts, result.duration_ms, f" reason={result.reason}" if result.reason else "")

    async def guardrail(self, run: RunContext, event: GuardEvent) -> None:
        if (m := self.metrics) is not None:
            m.child(m.guardrail_events, event.stage, event.type, event.action).inc()
        level = logging.WARNING if event.action == "block" else logging.INFO
        log.log(level, "guardrail: stage=%s rule=%s type=%s action=%s", event.stage, event.rule, event.type,
                event.action)

    async def turn_finished(self, run: RunContext, outcome: TurnOutcome) -> None:
        seconds = time.perf_counter() - self._started.pop(run.turn_id, time.perf_counter())
        status, usage = outcome.status, outcome.usage
        if (m := self.metrics) is not None:
            m.turns_in_progress.dec()
            m.child(m.turns, run.agent, run.trigger, status).inc()
            m.child(m.turn_seconds, run.agent).observe(seconds)
        level = logging.WARNING if outcome.error else logging.INFO
        log.log(level, "turn finished: status=%s iterations=%d tokens=%d/%d seconds=%.2f stopped_by=%s%s", status,
                outcome.iterations, usage.prompt_tokens, usage.completion_tokens, seconds, outcome.stopped_by,
                f" error={outcome.error}" if outcome.error else "")
