"""The durable inbox as the chat side sees it: an accepted event, stored with its claim, leased while it runs.

Pure data and a Protocol, so that `bot/chat` and `bot/store` meet here without importing each other."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from bot.engine.messages import Trigger, conversation_key

InboxState = Literal["claimed", "running", "parked", "answered", "failed", "interrupted", "skipped"]
LiveKind = Literal["status", "answer"]  # the live status message; the answer as it is being written
OPEN_STATES: tuple[InboxState, ...] = ("claimed", "running")  # leased while worked on; taken over when it lapses
# a row whose turn is not over: open, or parked on an approval (no lease: nothing runs it until a decision)
HELD_STATES: tuple[InboxState, ...] = (*OPEN_STATES, "parked")


def conversation_digest(platform: str, channel: str, thread: str) -> str:
    """The conversation key turns are ordered by, short (it is PostgreSQL NOTIFY's payload)."""
    return hashlib.blake2b(conversation_key(platform, channel, thread).encode(), digest_size=8).hexdigest()


@dataclass(frozen=True, slots=True)
class NewEvent:
    """What an adapter knows at the ack: enough to answer the message after a restart."""

    platform: str
    event_key: str  # unique per platform: the message, not the delivery
    channel: str
    thread: str
    text: str
    trigger: Trigger
    user: str | None = None
    reply: dict[str, Any] = field(default_factory=lambda: dict[str, Any]())  # reply target: message id, thread


@dataclass(frozen=True, slots=True)
class InboxItem:
    id: int
    platform: str
    event_key: str
    channel: str
    thread: str
    text: str
    trigger: Trigger
    user: str | None
    reply: dict[str, Any]
    state: InboxState = "claimed"
    attempts: int = 0
    agent: str | None = None
    turn_id: str | None = None
    effects: tuple[str, ...] = ()  # side-effecting tools its turn started (notify, remember, ...)
    # messages its turn posted while it ran, by kind (Slack: their ts; Discord: CHANNEL/MESSAGE); after a
    # crash, recovery settles them
    live: dict[LiveKind, str] = field(default_factory=lambda: dict[LiveKind, str]())
    parked: dict[str, Any] | None = None  # its turn parked on an approval: the state to resume (ParkedTurn)


class Inbox(Protocol):
    async def claim(self, event: NewEvent) -> InboxItem | None:
        """Store and lease the event in the transaction that claims it; None when it was already taken."""
        ...

    async def waited_out(self, error: BaseException) -> bool:
        """A turn failed before it started (nothing of it stored, no model called): True when `error` was the
        database being away and it answers again (waited for, up to the outage limit); then the turn starts
        again rather than apologise."""
        ...

    async def start(self, item: InboxItem, turn_id: str, agent: str) -> None:
        """The turn that answers it starts (a parked turn resumed: `turn_id` is its own, not a new start)."""
        ...

    async def park(self, item: InboxItem, state: dict[str, Any], approvals: Sequence[int]) -> bool:
        """Store the turn's state and drop the lease (`parked`); False (and still leased here) when one of
        `approvals` was decided already."""
        ...

    async def take_parked(self, turn_id: str) -> InboxItem | None:
        """Lease the row of a parked turn a decision made claimable; None when another instance has it."""
        ...

    async def waiting_in(self, session_id: str, item: InboxItem) -> str | None:
        """The tool another inbox row of this session is parked on (not `item`), or None."""
        ...

    async def trim_turn(self, turn_id: str, keep: int) -> None:
        """Drop the turn's messages after its first `keep` (what a cut resumed attempt added)."""
        ...

    async def effect(self, item: InboxItem, tool: str) -> None:
        """Durably note, before it runs, that the turn starts a side-effecting tool."""
        ...

    async def live_message(self, item: InboxItem, kind: LiveKind, ref: str) -> None:
        """Note the message the turn just posted to show its progress (queued with the turn's own rows)."""
        ...

    async def finish(self, item: InboxItem, state: InboxState, note: str | None = None) -> None:
        """Close the event (committed when this returns); the other instances hear of it (`on_closed`)."""
        ...

    async def take_over(self, limit: int = 50, *, every_open: bool = False,
                        platforms: Sequence[str] = (), owners: Sequence[str] = ()) -> list[InboxItem]:
        """Lease events whose holder died (lease expired; with every_open: all open ones; those `owners` hold,
        processes known to be gone, whatever their lease) to this instance."""
        ...

    async def earlier_elsewhere(self, item: InboxItem) -> bool:
        """Is an event of the item's conversation accepted before it still open, held by another instance (or
        by none)? Never, without a query, where this process is the database's only one (a SQLite file)."""
        ...

    def on_closed(self, wake: Callable[[str], None]) -> None:
        """Call `wake(conversation)` when another instance may have closed an event of that conversation."""
        ...

    async def answer_of(self, turn_id: str) -> str | None:
        """The answer a turn gave, once it finished (None while it runs, or when it gave none)."""
        ...

    async def interrupt_turn(self, turn_id: str, note: str, *, forget_history: bool) -> None:
        """End a turn that was cut short as `interrupted`; with forget_history, drop its partial messages."""
        ...

    async def interrupt_running_turns(self, note: str) -> int: ...
    def start_heartbeat(self) -> None: ...
