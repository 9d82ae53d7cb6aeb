"""ObservedStore: the engine's SessionStore and AuditLog ports, counted and logged, then delegated.

Every model call, tool call and turn already passes through these ports (the core records them, never
an adapter), so wrapping the port is the one place metrics see everything, with the engine untouched."""

from __future__ import annotations

import logging
import time
from typing import Protocol

from bot.engine.messages import Message, ToolResult, Usage
from bot.engine.ports import AuditLog, LLMCallRecord, SessionRecord, SessionStore
from bot.engine.service import CURRENT_TURN
from bot.engine.window import Thread
from bot.observability.metrics import Metrics

log = logging.getLogger("bot.turns")


class AuditedStore(SessionStore, AuditLog, Protocol):
    """What the wrapped store implements (SqlStore does)."""


class ObservedStore:
    def __init__(self, inner: AuditedStore, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics
        self._started: dict[str, tuple[float, str, str]] = {}  # turn id -> (perf clock, agent, trigger)

    # --- SessionStore: turns are timed and counted --------------------------------------------------
    async def session_for(self, platform: str, channel: str, thread: str, agent: str) -> SessionRecord:
        return await self.inner.session_for(platform, channel, thread, agent)

    async def get_session(self, session_id: str) -> SessionRecord | None:
        return await self.inner.get_session(session_id)

    async def history(self, session_id: str, max_turns: int) -> list[Message]:
        return await self.inner.history(session_id, max_turns)

    async def load_thread(self, session_id: str, max_turns: int) -> Thread:
        return await self.inner.load_thread(session_id, max_turns)

    async def save_summary(self, session_id: str, turn_id: str, through_turn_id: str, text: str,
                           folded_turns: int) -> None:
        await self.inner.save_summary(session_id, turn_id, through_turn_id, text, folded_turns)
        log.info("thread compacted: %d turn(s) folded into the summary", folded_turns)

    async def reset_thread(self, session_id: str, turn_id: str | None = None) -> None:
        await self.inner.reset_thread(session_id, turn_id)
        log.info("thread memory reset")

    async def append(self, session_id: str, turn_id: str, message: Message) -> None:
        await self.inner.append(session_id, turn_id, message)

    async def start_turn(
        self, session_id: str, turn_id: str, trigger: str, user: str | None, text: str
    ) -> None:
        await self.inner.start_turn(session_id, turn_id, trigger, user, text)
        info = CURRENT_TURN.get()
        agent = info.agent if info is not None else "unknown"
        self._started[turn_id] = (time.perf_counter(), agent, trigger)
        self.metrics.turns_in_progress.inc()
        log.info("turn started: agent=%s trigger=%s user=%s", agent, trigger, user)

    async def finish_turn(
        self, turn_id: str, *, answer: str, iterations: int, hit_limit: bool, usage: Usage, error: str | None
    ) -> None:
        try:
            await self.inner.finish_turn(turn_id, answer=answer, iterations=iterations, hit_limit=hit_limit,
                                         usage=usage, error=error)
        finally:
            self._count_finish(turn_id, iterations, hit_limit, usage, error)

    def _count_finish(self, turn_id: str, iterations: int, hit_limit: bool, usage: Usage, error: str | None) -> None:
        started, agent, trigger = self._started.pop(turn_id, (time.perf_counter(), "unknown", "unknown"))
        status = "error" if error else ("limit" if hit_limit else "ok")
        seconds = time.perf_counter() - started
        self.metrics.turns_in_progress.dec()
        self.metrics.turns.labels(agent=agent, trigger=trigger, status=status).inc()
        self.metrics.turn_seconds.labels(agent=agent).observe(seconds)
        level = logging.WARNING if error else logging.INFO
        log.log(level, "turn finished: status=%s iterations=%d tokens=%d/%d seconds=%.2f%s", status,
                iterations, usage.prompt_tokens, usage.completion_tokens, seconds,
                f" error={error}" if error else "")

    # --- AuditLog: model and tool calls --------------------------------------------------------------
    async def record_llm_call(self, record: LLMCallRecord) -> None:
        await self.inner.record_llm_call(record)
        m = self.metrics
        outcome = "error" if record.error else "ok"
        m.model_calls.labels(agent=record.agent, model=record.model, outcome=outcome).inc()
        m.model_seconds.labels(model=record.model).observe(record.latency_ms / 1000)
        m.tokens.labels(agent=record.agent, model=record.model, kind="prompt").inc(record.usage.prompt_tokens)
        m.tokens.labels(agent=record.agent, model=record.model, kind="completion").inc(
            record.usage.completion_tokens)
        if record.error:
            log.warning("model call failed: model=%s attempt=%d error=%s", record.model, record.attempt,
                        record.error)

    async def record_tool_call(self, session_id: str, turn_id: str, agent: str, result: ToolResult) -> None:
        await self.inner.record_tool_call(session_id, turn_id, agent, result)
        self.metrics.tool_calls.labels(agent=agent, tool=result.tool, status=result.status).inc()
        self.metrics.tool_seconds.labels(tool=result.tool).observe(result.duration_ms / 1000)
        log.info("tool call: tool=%s status=%s attempts=%d ms=%.0f%s", result.tool, result.status,
                 result.attempts, result.duration_ms, f" reason={result.reason}" if result.reason else "")
