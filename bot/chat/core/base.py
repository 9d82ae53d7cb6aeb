"""What a platform hands the inbound pipeline (`Inbound`, with its `ReplySurface`), and the posting port.

A platform adapter parses its events into one `Inbound` and offers a reply surface; everything between
(claim, routing, access, the concurrency cap, tasks, the drain) is `bot/chat/core/pipeline.py`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from bot.chat.core.access import Origin
from bot.engine.context import Trigger as Trigger  # one Trigger, the engine's
from bot.engine.service import TurnRequest


class ReplySurface(Protocol):
    """How the answer to one inbound message reaches its author. Written once per platform.

    The pipeline calls, in this order: `working()` (once a turn will run), `deliver()` (the answer, an error
    sentence or the shutdown notice), `done(ok)`. A refusal or a hint is `deliver()` alone, without `working()`.

    A surface may carry `hooks` (a TurnHooks the pipeline passes to `AgentService.handle`): Slack and Discord
    carry `Progress` (bot/chat/core/progress.py: a live status and the answer as it is written; `deliver()` then
    finishes the answer in place), the console its LiveView. Approval buttons are meant to be further
    optional methods here, used by the pipeline when present, so they are written once for every platform."""

    async def working(self) -> str:
        """Show that the bot is on it (:eyes:, typing…). Returns the conversation key the turn belongs to (the
        session's thread: Discord may open a thread here)."""
        ...

    async def deliver(self, text: str) -> None:
        """Post Markdown text under the platform's rules (mrkdwn, splitting, a file for very long text)."""
        ...

    async def done(self, ok: bool) -> None:
        """The turn is over: ✅ or ❌ (and stop any working indicator)."""
        ...


@dataclass(frozen=True, slots=True)
class Inbound:
    """One chat message addressed to the bot, parsed by its platform."""

    origin: Origin  # who and where, in platform IDs (routing and access read it)
    thread: str  # the conversation key (the session's thread) when known at parse time
    text: str
    trigger: Trigger
    reply: ReplySurface
    message_id: str | None = None
    claim_key: str | None = None  # exactly once: the key claimed in the database; None: no claim (console)
    groups_known: bool = False  # origin.groups were read from the event (else looked up when a list needs them)
    addressed: Callable[[], Awaitable[bool]] | None = None  # a check made after the ack (Slack thread follow-ups)
    # the reply target as plain data (message ts, reply thread…): the durable inbox stores it with the claim,
    # and the adapter's `rebuild` makes the reply surface from it again after a restart
    target: Mapping[str, Any] = field(default_factory=lambda: dict[str, Any]())

    @property
    def platform(self) -> str:
        return self.origin.platform

    def to_request(self, agent: str, thread: str) -> TurnRequest:
        o = self.origin
        return TurnRequest(platform=o.platform, channel=o.channel, thread=thread, text=self.text, agent=agent,
                           trigger=self.trigger, user=o.user)


class Directory(Protocol):
    """What the pipeline may ask a platform about an origin, only when a list needs it."""

    async def channel_name(self, channel: str) -> str | None: ...
    async def groups_of(self, user: str) -> frozenset[str]: ...


class ChatAdapter(Protocol):
    """What `notify` and schedules post through (`AdapterNotifier`)."""

    platform: str

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
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
    """What the pipeline counts inbound events with (`Metrics.adapter_event` in bot/observability/metrics.py):
    kinds `mention`, `dm`, `thread` (taken), `ignored`, `duplicate` (not taken), and, in addition for a
    taken event, `refused` (access lists) or `error` (the turn could not be handled)."""

    def adapter_event(self, platform: str, kind: str) -> None: ...


class EventClaims(Protocol):
    """`SqlStore.claim_event`: True the first time a key is seen, in any process sharing the database."""

    async def claim_event(self, platform: str, event_id: str) -> bool: ...
