"""The pipeline's exactly-once step, as a small port: `take` before the ack, `started` just before the turn,
`finish` when the message is handled.

Without the durable inbox it is a row in `processed_events` (`SqlStore.claim_event`), behind an in-memory set
of recent keys (a resumed Discord gateway replays events; a Slack retry can reach the same process):
`ProcessedEvents`. With it (Slack and Discord in `yokebot run`) it is `InboxTurns`
(`bot/chat/core/inbox_turns.py`): "store the event with its claim in one transaction, then lease it"."""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from bot.chat.core.base import EventClaims, Inbound
from bot.engine.run import TurnHooks
from bot.engine.service import TurnRequest

RECENT_MAX = 4096


class ExactlyOnce(Protocol):
    async def take(self, inbound: Inbound) -> bool:
        """True the first time this message is seen (by any process sharing the database)."""
        ...

    async def started(self, inbound: Inbound, request: TurnRequest,
                      hooks: TurnHooks | None) -> tuple[TurnRequest, TurnHooks | None]:
        """A turn is about to run for the message: the step may name the turn and add its own turn hooks to
        the surface's `hooks` (the inbox records the turn, and the side-effecting tools it starts)."""
        ...

    async def delivered(self, inbound: Inbound, ok: bool) -> None:
        """The turn's answer (or its one sentence) was posted: the message is handled from this moment, so a
        crash before `finish` does not answer it again."""
        ...

    async def finish(self, inbound: Inbound, ok: bool) -> None:
        """The message was handled (answered, refused, or failed with a sentence to the user)."""
        ...

    async def waited_out(self, error: BaseException) -> bool:
        """The message's turn failed before it started: True when that was the database being away, and it
        is back (waited for); the turn then starts again instead of apologising."""
        ...


class ProcessedEvents:
    """`processed_events` rows, keyed `namespace` + the inbound's `claim_key` (no store: this process only)."""

    def __init__(self, store: EventClaims | None, namespace: str) -> None:
        self.store, self.namespace = store, namespace
        self._recent: OrderedDict[str, None] = OrderedDict()

    async def take(self, inbound: Inbound) -> bool:
        key = inbound.claim_key
        if key is None:
            return True
        if key in self._recent:
            return False
        self._recent[key] = None
        while len(self._recent) > RECENT_MAX:
            self._recent.popitem(last=False)
        return self.store is None or await self.store.claim_event(self.namespace, key)

    async def started(self, inbound: Inbound, request: TurnRequest,
                      hooks: TurnHooks | None) -> tuple[TurnRequest, TurnHooks | None]:
        return request, hooks

    async def delivered(self, inbound: Inbound, ok: bool) -> None:
        return None

    async def finish(self, inbound: Inbound, ok: bool) -> None:
        return None

    async def waited_out(self, error: BaseException) -> bool:
        return False  # no inbox row holds the message: it is not started again
