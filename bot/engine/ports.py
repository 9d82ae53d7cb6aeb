"""What the engine needs from outside, as Protocols. `bot/store` and `bot/chat` implement them."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from bot.engine.messages import Message, ToolResult, Usage


@dataclass(frozen=True, slots=True)
class SessionRecord:
    id: str
    platform: str
    channel: str
    thread: str
    agent: str
    created: bool = False  # made by this call: it has no history yet


@dataclass(frozen=True, slots=True)
class MemoryItem:
    id: int
    agent: str
    channel: str | None
    content: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class LLMCallRecord:
    session_id: str
    turn_id: str
    agent: str
    model: str
    attempt: int
    request: dict[str, Any]
    response: dict[str, Any] | None
    usage: Usage
    latency_ms: float
    finish_reason: str | None = None
    error: str | None = None


class SessionStore(Protocol):
    async def session_for(self, platform: str, channel: str, thread: str, agent: str) -> SessionRecord: ...
    async def get_session(self, session_id: str) -> SessionRecord | None: ...
    async def history(self, session_id: str, max_turns: int) -> list[Message]: ...
    async def append(self, session_id: str, turn_id: str, message: Message) -> None: ...
    async def start_turn(self, session_id: str, turn_id: str, trigger: str, user: str | None, text: str) -> None: ...
    async def finish_turn(
        self, turn_id: str, *, answer: str, iterations: int, hit_limit: bool, usage: Usage, error: str | None
    ) -> None: ...


class AuditLog(Protocol):
    async def record_llm_call(self, record: LLMCallRecord) -> None: ...
    async def record_tool_call(self, session_id: str, turn_id: str, agent: str, result: ToolResult) -> None: ...


class MemoryStore(Protocol):
    async def recall(self, agent: str, channel: str | None, limit: int) -> list[MemoryItem]: ...
    async def remember(self, agent: str, channel: str | None, content: str, session_id: str | None) -> int: ...
    async def forget(self, agent: str, memory_id: int) -> bool: ...


class Notifier(Protocol):
    """Posts a message to a target like `slack:#ops-alerts` or `discord:123`; returns a reference."""

    async def notify(self, target: str, text: str) -> str: ...


class SessionLock(Protocol):
    """One turn per session at a time across processes sharing the database (PostgreSQL: an advisory lock
    per session, held for the turn). The service holds its in-process lock first, so only one task of a
    process waits here."""

    def hold(self, session_id: str) -> AbstractAsyncContextManager[None]: ...
