"""SqlRecorder: the turn hooks that write a turn to SQL through SqlStore's write-behind queue. Rows are
queued in order off the turn's critical path; `turn_finished` waits until all of them are committed and
raises WriteFailed if one was refused (the turn then fails rather than claiming a record it lacks)."""

from __future__ import annotations

from typing import Any

from bot.engine.context import AttachmentRecord
from bot.engine.messages import GuardEvent, Message, ToolResult, TurnOutcome
from bot.engine.model import ModelAttempt, response_dict
from bot.engine.run import RunContext, TurnHooks
from bot.store.attachments import record_attachments
from bot.store.guardrails import record_guardrail
from bot.store.repositories import LLMCallRecord, SqlStore


class SqlRecorder(TurnHooks):
    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self._children: dict[str, list[str]] = {}  # a turn still running -> its finished sub-agents' turns

    async def turn_started(self, run: RunContext, text: str) -> None:
        d = run.delegation
        parent = (d.parent_turn, d.parent_call or "") if d is not None and d.parent_turn is not None else None
        await self.store.start_turn(run.session_id, run.turn_id, run.trigger, run.scope.user, text, parent)

    async def attachments_read(self, run: RunContext, records: tuple[AttachmentRecord, ...]) -> None:
        record_attachments(self.store.writes, run.session_id, run.turn_id, records)

    async def message_appended(self, run: RunContext, message: Message) -> None:
        await self.store.append(run.session_id, run.turn_id, message)

    async def model_attempt(self, run: RunContext, attempt: ModelAttempt) -> None:
        response, err = attempt.response, attempt.error
        error = (err.detail or f"{type(err).__name__}: {err}") if err is not None else None
        await self.store.record_llm_call(LLMCallRecord(
            run.session_id, run.turn_id, run.agent, attempt.model, attempt.attempt,
            attempt.request.payload, response_dict(response) if response is not None else None,
            attempt.usage, attempt.latency_ms, response.finish_reason if response is not None else None, error,
            attempt.request.purpose, run.parent_turn_id,
        ))

    async def tool_finished(self, run: RunContext, result: ToolResult) -> None:
        await self.store.record_tool_call(run.session_id, run.turn_id, run.agent, result, run.parent_turn_id)

    async def guardrail(self, run: RunContext, event: GuardEvent) -> None:
        record_guardrail(self.store.writes, run.session_id, run.turn_id, run.agent, event)

    async def plan_made(self, run: RunContext, plan: dict[str, Any]) -> None:
        await self.store.record_plan(run.turn_id, plan)

    async def turn_finished(self, run: RunContext, outcome: TurnOutcome) -> None:
        children = self._children.pop(run.turn_id, [])
        if run.parent_turn_id is not None:  # a sub-agent's turn: its rows go with its tree's, which waits for all
            self.store.queue_finish(run.turn_id, outcome)  # of them when it ends (the writer keeps their order)
            self._children.setdefault(run.parent_turn_id, []).extend([run.turn_id, *children])
            return
        await self.store.finish_turn(run.turn_id, outcome)
        for child in children:  # committed with the tree's: a row of theirs refused fails the tree's turn
            await self.store.flush(child)
