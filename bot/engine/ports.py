"""What the engine needs from outside, as Protocols. `bot/store` and `bot/chat` implement them."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from bot.engine.window import Thread


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


class SessionStore(Protocol):
    """Sessions and their history (reads). A turn's writes go through the turn hooks (the recorder)."""

    async def session_for(self, platform: str, channel: str, thread: str, agent: str) -> SessionRecord: ...
    async def get_session(self, session_id: str) -> SessionRecord | None: ...
    async def load_thread(self, session_id: str, max_turns: int) -> Thread:
        """The latest summary and the turns after it (docs/context.md)."""
        ...
    async def save_summary(self, session_id: str, turn_id: str, through_turn_id: str, text: str,
                           folded_turns: int) -> None: ...
    async def reset_thread(self, session_id: str, turn_id: str | None = None) -> None: ...


class MemoryStore(Protocol):
    async def recall(self, agent: str, channel: str | None, limit: int) -> list[MemoryItem]: ...
    async def remember(self, agent: str, channel: str | None, content: str, session_id: str | None,
                       max_items: int | None = None) -> int | None:
        """The new fact's id; None: not stored (the same fact is there, or the channel holds `max_items`),
        decided atomically with the INSERT."""
        ...
    async def forget(self, agent: str, memory_id: int) -> bool: ...


class Notifier(Protocol):
    """Posts a message to a target like `slack:#ops-alerts` or `discord:123`; returns a reference."""

    async def notify(self, target: str, text: str) -> str: ...


class SessionLock(Protocol):
    """One turn per conversation thread at a time across processes sharing the database (PostgreSQL: an
    advisory lock per thread, held for the turn; the service's `thread_key`). The service holds its
    in-process lock first, so only one task of a process waits here."""

    def hold(self, thread: str) -> AbstractAsyncContextManager[None]: ...
