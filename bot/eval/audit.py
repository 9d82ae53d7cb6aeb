"""What happened in a scenario, read back from the audit tables the turn wrote (turns, tool_invocations,
llm_calls): the grader sees exactly what `yokebot trace` would show."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store.models import LLMCallRow, ToolInvocationRow, TurnRow


@dataclass(frozen=True, slots=True)
class ToolCallSeen:
    tool: str
    arguments: dict[str, Any]
    status: str  # ok | error | denied
    result: str


@dataclass
class TurnSeen:
    answer: str = ""
    status: str = "missing"  # ok | limit | error | running | missing (no row)
    error: str | None = None
    iterations: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_calls: int = 0  # llm_calls rows: attempts, retries included
    models: tuple[str, ...] = ()
    tools: list[ToolCallSeen] = field(default_factory=lambda: list[ToolCallSeen]())

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def _arguments(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {"(raw)": value}  # pyright: ignore[reportUnknownArgumentType]


async def read_turn(engine: AsyncEngine, session_id: str) -> TurnSeen:
    """The (one) turn of the scenario's session, its tool calls in order, and its model calls."""
    async with engine.connect() as conn:
        turn = (await conn.execute(
            select(TurnRow).where(TurnRow.session_id == session_id).order_by(TurnRow.started_at)
        )).first()
        tools = (await conn.execute(
            select(ToolInvocationRow).where(ToolInvocationRow.session_id == session_id)
            .order_by(ToolInvocationRow.id)
        )).all()
        calls = (await conn.execute(
            select(LLMCallRow.model, LLMCallRow.prompt_tokens, LLMCallRow.completion_tokens)
            .where(LLMCallRow.session_id == session_id).order_by(LLMCallRow.id)
        )).all()
    seen = TurnSeen(model_calls=len(calls), models=tuple(sorted({c.model for c in calls})))
    seen.tools = [ToolCallSeen(t.tool, _arguments(t.arguments), t.status, t.result or "") for t in tools]
    if turn is not None:
        seen.answer, seen.status, seen.error = turn.answer or "", turn.status, turn.error
        seen.iterations, seen.prompt_tokens, seen.completion_tokens = (
            turn.iterations, turn.prompt_tokens, turn.completion_tokens)
    return seen
