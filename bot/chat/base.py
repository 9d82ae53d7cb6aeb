"""What adapters hand to the engine and get back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from bot.engine.service import TurnRequest


@dataclass(frozen=True, slots=True)
class InboundMessage:
    platform: str
    channel: str
    thread: str
    text: str
    user: str | None = None
    trigger: str = "message"
    message_id: str | None = None
    event_id: str | None = None
    extra: dict[str, Any] = field(default_factory=lambda: {})

    def to_request(self, agent: str, session_id: str | None = None) -> TurnRequest:
        return TurnRequest(platform=self.platform, channel=self.channel, thread=self.thread, text=self.text,
                           agent=agent, trigger=self.trigger, user=self.user, session_id=session_id)


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    platform: str
    channel: str
    thread: str | None
    text: str
    failed: bool = False


class ChatAdapter(Protocol):
    platform: str

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def send(self, message: OutboundMessage) -> str: ...
    async def post(self, channel: str, text: str) -> str:
        """Post to a channel by name or id (used by notify and schedules); returns a message reference."""
        ...


@runtime_checkable
class ReadinessProbe(Protocol):
    """Optional for adapters: `/readyz` reports not ready while a registered adapter that has this method says
    False (Slack: the Socket Mode connection is open, or the HTTP route is mounted; Discord: the gateway
    session is READY and not closed). Adapters without it count as ready, shown as "unknown"."""

    def is_connected(self) -> bool: ...


class EventCounter(Protocol):
    """What adapters count inbound events with (`Metrics.adapter_event` in bot/observability/metrics.py):
    kinds `mention`, `dm`, `thread` (taken), `ignored`, `duplicate` (not taken), and, in addition for a
    taken event, `refused` (access lists) or `error` (the turn could not be handled)."""

    def adapter_event(self, platform: str, kind: str) -> None: ...


class EventClaims(Protocol):
    """`SqlStore.claim_event`: True the first time a key is seen, in any process sharing the database."""

    async def claim_event(self, platform: str, event_id: str) -> bool: ...
