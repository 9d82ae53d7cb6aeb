"""MetricsHooks: the turn hooks that count turns, model attempts and tool calls in Prometheus (when the app
exports metrics: `yokebot run`) and log one line for each (with the turn's session and trace id, from the
log filter)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from bot.engine.context import RunContext
from bot.engine.hooks import ModelAttempt, TurnHooks
from bot.engine.messages import ToolResult, TurnOutcome

if TYPE_CHECKING:  # the terminal commands export no metrics and do not import prometheus-client
    from bot.observability.metrics import Metrics

log = logging.getLogger("bot.turns")


class MetricsHooks(TurnHooks):
    def __init__(self, metrics: Metrics | None) -> None:
        self.metrics = metrics
        self._started: dict[str, float] = {}  # turn id -> perf clock

    async def turn_started(self, run: RunContext, text: str) -> None:
        self._started[run.turn_id] = time.perf_counter()
        if self.metrics is not None:
            self.metrics.turns_in_progress.inc()
        log.info("turn started: agent=%s trigger=%s user=%s", run.agent, run.trigger, run.scope.user)

    async def model_attempt(self, run: RunContext, attempt: ModelAttempt) -> None:
        m, model, usage = self.metrics, attempt.model, attempt.usage
        if m is not None:
            m.model_calls.labels(agent=run.agent, model=model, outcome="error" if attempt.error else "ok").inc()
            m.model_seconds.labels(model=model).observe(attempt.latency_ms / 1000)
            m.tokens.labels(agent=run.agent, model=model, kind="prompt").inc(usage.prompt_tokens)
            m.tokens.labels(agent=run.agent, model=model, kind="completion").inc(usage.completion_tokens)
        if attempt.error is not None:
            log.warning("model call failed: model=%s attempt=%d error=%s", model, attempt.attempt,
                        attempt.error.detail or attempt.error)

    async def tool_finished(self, run: RunContext, result: ToolResult) -> None:
        if self.metrics is not None:
            self.metrics.tool_calls.labels(agent=run.agent, tool=result.tool, status=result.status).inc()
            self.metrics.tool_seconds.labels(tool=result.tool).observe(result.duration_ms / 1000)
        log.info("tool call: tool=%s status=%s attempts=%d ms=%.0f%s", result.tool, result.status,
                 result.attempts, result.duration_ms, f" reason={result.reason}" if result.reason else "")

    async def turn_finished(self, run: RunContext, outcome: TurnOutcome) -> None:
        seconds = time.perf_counter() - self._started.pop(run.turn_id, time.perf_counter())
        status, usage = outcome.status, outcome.usage
        if self.metrics is not None:
            self.metrics.turns_in_progress.dec()
            self.metrics.turns.labels(agent=run.agent, trigger=run.trigger, status=status).inc()
            self.metrics.turn_seconds.labels(agent=run.agent).observe(seconds)
        level = logging.WARNING if outcome.error else logging.INFO
        log.log(level, "turn finished: status=%s iterations=%d tokens=%d/%d seconds=%.2f stopped_by=%s%s", status,
                outcome.iterations, usage.prompt_tokens, usage.completion_tokens, seconds, outcome.stopped_by,
                f" error={outcome.error}" if outcome.error else "")
