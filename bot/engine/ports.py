"""What the engine needs from outside, as Protocols. `bot/store` and `bot/chat` implement them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from bot.engine.messages import Scope, Thread


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
class Remembered:
    """What `MemoryStore.remember` did: stored the fact as `id`, or found it stored already (`new` False);
    `dropped`: the fact it deleted to make room (the channel held `max_items`)."""

    id: int
    new: bool = True
    dropped: MemoryItem | None = None


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
    """Long-term facts per agent, each for one channel or for all (channel None). docs/knowledge.md."""

    async def recall(self, agent: str, channel: str | None, query: str, limit: int) -> list[MemoryItem]:
        """The agent's facts for `channel` (and those for all channels) most relevant to `query`, best first, at
        most `limit`: keyword ranking (and embeddings, when configured) merged, recency breaking ties; facts
        that match nothing come after those that do, newest first. An empty query: the newest."""
        ...

    def recalled(self, ids: Sequence[int]) -> None:
        """These facts were put in a prompt: counted (a full memory drops the least recalled first)."""
        ...

    async def remember(self, agent: str, channel: str | None, content: str, session_id: str | None,
                       max_items: int | None = None) -> Remembered:
        """Store a fact, unless the same one is there; a channel holding `max_items` drops its least recalled,
        oldest fact to make room. Decided atomically with the INSERT (parallel calls, several instances)."""
        ...

    async def forget(self, agent: str, memory_id: int, channel: str | None = None) -> MemoryItem | None:
        """Delete one fact of the agent (with `channel`: only if it is that channel's); the fact, or None."""
        ...


class Embedder(Protocol):
    """Text to vectors (the model endpoint's `/v1/embeddings`, bot/engine/model/embeddings.py). None: no vectors
    this time (the endpoint failed; the caller goes on with keywords alone)."""

    @property
    def model(self) -> str: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]] | None: ...


class Notifier(Protocol):
    """Posts a message to a target like `slack:#ops-alerts` or `discord:123`; returns a reference."""

    def unreachable(self, target: str) -> str | None:
        """Why a post to `target` would reach nobody (`yokebot chat` shows it in its terminal only), or None:
        it goes to the target's platform (or fails there)."""
        ...

    async def notify(self, target: str, text: str, scope: Scope | None = None) -> str:
        """Post `text`; `scope`: where the turn happens. When the target is the channel of the turn's thread (an
        alert's investigation notifying the channel its root is in), the post goes into that thread, not to the
        top of the channel."""
        ...


@dataclass(frozen=True, slots=True)
class AlertKey:
    """One alert about to be posted, as the notify ledger keys it."""

    agent: str
    target: str
    digest: str  # sha256 of the alert's text, whitespace folded: the same alert has the same digest
    turn_id: str
    reply: int  # the model reply of the turn that asked for it


@dataclass(frozen=True, slots=True)
class AlertHistory:
    """What the ledger held for an alert's key when it was checked (the alert itself not counted)."""

    same_ago: float | None = None  # seconds since the same alert (agent, target, text) went out, in the window
    same_ref: str | None = None  # that alert's reference (None while it is still being posted)
    this_reply: int = 0  # alerts sent from the same model reply of the turn
    this_turn: int = 0  # alerts sent in the turn
    to_target: int = 0  # alerts sent to the same target in the last minute, by any agent


class NotifyLedger(Protocol):
    """The notifications sent, by every process sharing the database (bot/store/notify_ledger.py), so
    notify's limits and its dedup window hold across instances. A failed post still counts for the limits,
    not for the dedup window."""

    async def claim(self, key: AlertKey, window: float,
                    allow: Callable[[AlertHistory], bool]) -> tuple[AlertHistory, int | None]:
        """Read the key's history (the same alert within `window` seconds, the counts) and, if `allow` says
        so, record the alert as being posted, in one atomic step for the target across instances. Returns
        the history and the new entry's id (None: not allowed, nothing recorded)."""
        ...

    async def posted(self, entry: int, ref: str) -> None: ...
    async def failed(self, entry: int) -> None: ...


class SessionLock(Protocol):
    """One turn per conversation at a time across processes sharing the database (PostgreSQL: an advisory
    lock per conversation, held for the turn; `messages.conversation_key`). The service holds its in-process
    lock first, so only one task of a process waits here."""

    def hold(self, conversation: str) -> AbstractAsyncContextManager[None]: ...


@dataclass(frozen=True, slots=True)
class SpendScope:
    """What a spend cap counts (bot/engine/run/spend.py): every agent's calls (`agent` None: the global cap,
    YOKEBOT_SPEND_DAILY_USD), one agent's, or one agent's in one channel (`spend: {scope: channel}`)."""

    agent: str | None = None
    platform: str | None = None
    channel: str | None = None

    @property
    def key(self) -> str:
        """Names the scope in the slot's lock, the notice's claim and the logs."""
        if self.agent is None:
            return "all"
        return f"agent:{self.agent}" if self.channel is None else f"agent:{self.agent}@{self.platform}:{self.channel}"


@dataclass(frozen=True, slots=True)
class ModelSpend:
    """One model's calls in a scope (from `llm_calls`): tokens today and since the month began (UTC), and the
    largest call's tokens (how far the next call may go)."""

    model: str
    day_prompt: int = 0
    day_completion: int = 0
    month_prompt: int = 0
    month_completion: int = 0
    max_prompt: int = 0
    max_completion: int = 0


class SpendLedger(Protocol):
    """What the spend caps read and claim in the database every instance shares (bot/store/spend.py)."""

    async def spent(self, scope: SpendScope, day: datetime, month: datetime | None) -> list[ModelSpend]:
        """The scope's calls since `day` (and since `month`, when given), by model; calls queued for the
        write-behind queue before this call are committed first, so this process's own are in."""
        ...

    async def take(self, scope: SpendScope) -> bool:
        """The scope's slot, held until `release`, or False at once when another process holds it. Dropped
        with the process (an advisory lock on PostgreSQL, a file lock on SQLite)."""
        ...

    async def release(self, scope: SpendScope) -> None: ...

    async def first(self, claim: str) -> bool:
        """True for the first caller of `claim` among every instance (the first refusal of a period)."""
        ...

    async def close(self) -> None: ...
