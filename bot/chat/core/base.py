"""What a platform hands the inbound pipeline (`Inbound`, with its `ReplySurface`), and the posting port.

A platform adapter parses its events into one `Inbound` and offers a reply surface; everything between
(claim, routing, access, the concurrency cap, tasks, the drain) is `bot/chat/core/pipeline.py`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from bot.chat.core.access import Origin
from bot.engine.context import AttachmentSource
from bot.engine.messages import Scope
from bot.engine.messages import Trigger as Trigger  # one Trigger, the engine's
from bot.engine.run import RunContext, TurnHooks
from bot.engine.service import TurnRequest
from bot.records.inbox import LiveKind


class ReplySurface(ABC):
    """How the answer to one inbound message reaches its author. One subclass per platform.

    The pipeline calls, in this order: `working()` (once a turn will run), `deliver()` (the answer, an error
    sentence or the shutdown notice), `done(ok)`. A refusal or a hint is `deliver()` alone, without `working()`.

    Every optional capability is declared here with its default, so shared code never probes for one:
    - `hooks`: a TurnHooks the pipeline passes to `AgentService.handle` (Slack and Discord: `Progress`, the live
      status and the answer as it is written, bot/chat/core/live.py; the console: its LiveView);
    - `stopped_text`: what the user reads when a turn is cut at shutdown (None: the pipeline's STOPPED);
    - `track(note)` and `leftovers(live)`: the messages a turn posts to show itself, noted on the inbox row, and
      settled after a crash (bot/chat/core/inbox_turns.py);
    - `parked()`: instead of `deliver()` and `done()`, when the turn parked on an approval (its answer comes
      from the resumed turn, through a reply surface rebuilt from the inbox row).
    Approval requests are not a reply's: the desk posts them through the platform's buttons, registered once
    per platform (`Platform.mount_approvals`, bot/chat/core/platform.py)."""

    hooks: TurnHooks | None = None
    stopped_text: str | None = None
    # the message as this surface repeats it where others read it (a command's `ask`: "@alice asked: …", a
    # thread's name); the pipeline sets it, before `working()`, to the text as the agent's input guardrails leave
    # it, so a secret or a blocked match its author typed is not shown to the channel ("": it shows none)
    question: str = ""

    @abstractmethod
    async def working(self) -> str:
        """Show that the bot is on it (:eyes:, typing…). Returns the conversation key the turn belongs to (the
        session's thread: Discord may open a thread here)."""

    @abstractmethod
    async def deliver(self, text: str) -> None:
        """Post Markdown text under the platform's rules (mrkdwn, splitting, a file for very long text)."""

    @abstractmethod
    async def done(self, ok: bool) -> None:
        """The turn is over: ✅ or ❌ (and stop any working indicator)."""

    def track(self, note: Callable[[LiveKind, str], Awaitable[None]]) -> None:
        """Tell `note` of every message posted to show this turn (status, partial answer) as it is posted."""
        return None

    async def leftovers(self, live: Mapping[LiveKind, str]) -> None:
        """A turn for this message ran in a process that is gone: settle the messages it left."""
        return None

    async def parked(self) -> None:
        """The turn waits for an approval: stop showing progress (the request says what it waits for)."""
        return None

    async def shows(self, answer: str) -> bool:
        """A turn for this message, in a process that is gone, finished with `answer`: does the conversation show
        it already (posted, and the process killed before the message's row was closed)? Asked of the platform
        after a crash, so that the message is not answered twice; False where it cannot be told."""
        return False



class OpensInner(ReplySurface):
    """A command's reply that, once its turn starts (`working()`), opens an inner reply (a message's, in the
    thread it starts) and hands it the rest of the turn: the end, the parking, the noting of live messages."""

    inner: ReplySurface | None = None

    async def done(self, ok: bool) -> None:
        if self.inner is not None:
            await self.inner.done(ok)

    async def parked(self) -> None:
        if self.inner is not None:
            await self.inner.parked()

    def track(self, note: Callable[[LiveKind, str], Awaitable[None]]) -> None:
        """The turn's live messages (in the thread `working()` opened) are noted for recovery, as a mention's."""
        if self.inner is not None:
            self.inner.track(note)

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
    files: tuple[AttachmentSource, ...] = ()  # attached files (bot/chat/core/attachments.py); refs in target
    # a command's own answer (`/yokebot status`…, bot/chat/core/commands.py): the turn is recorded, no model call
    answer: Callable[[RunContext], Awaitable[str]] | None = None

    @property
    def platform(self) -> str:
        return self.origin.platform

    def to_request(self, agent: str, thread: str) -> TurnRequest:
        o = self.origin
        return TurnRequest(platform=o.platform, channel=o.channel, thread=thread, text=self.text, agent=agent,
                           trigger=self.trigger, user=o.user, attachments=self.files, answer=self.answer)


class Directory(Protocol):
    """What the pipeline may ask a platform about an origin, only when a list needs it."""

    async def channel_name(self, channel: str) -> str | None: ...
    async def groups_of(self, user: str) -> frozenset[str]: ...


class ChatAdapter(Protocol):
    """What `notify` and schedules post through (`AdapterNotifier`)."""

    platform: str

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def post(self, channel: str, text: str, within: Scope | None = None) -> str:
        """Post to a channel by name or id (used by notify and schedules); returns a message reference.
        `within`: the conversation of the turn posting (this platform's); when `channel` is its channel, the post
        goes into its thread instead of the top of the channel (`AdapterNotifier`)."""
        ...


@runtime_checkable
class ReadinessProbe(Protocol):
    """Optional for adapters: `/readyz` reports not ready while a registered adapter that has this method says
    False (Slack: the Socket Mode connection is open, or the HTTP route is mounted; Discord: the gateway
    session is READY and not closed). Adapters without it count as ready, shown as "unknown"."""

    def is_connected(self) -> bool: ...


class EventCounter(Protocol):
    """What the pipeline counts inbound events with (`Metrics.adapter_event` in bot/observability/metrics.py):
    kinds `mention`, `dm`, `thread`, `command` (taken), `ignored`, `duplicate` (not taken), and, in addition for a
    taken event, `refused` (access lists) or `error` (the turn could not be handled)."""

    def adapter_event(self, platform: str, kind: str) -> None: ...


class EventClaims(Protocol):
    """`SqlStore.claim_event`: True the first time a key is seen, in any process sharing the database."""

    async def claim_event(self, platform: str, event_id: str) -> bool: ...
