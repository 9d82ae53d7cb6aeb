"""What a chat platform is to the rest of yokebot: the `Platform` protocol that `yokebot run` starts, stops,
posts through, recovers with and mounts routes and approval clicks from, and the parts one is built from.
The registry of platforms is `bot/chat/platforms.py`; a new platform is a package under `bot/chat/` and one
entry there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot.chat.core.base import EventClaims, EventCounter, Inbound
from bot.chat.core.exactly_once import ExactlyOnce
from bot.chat.core.pipeline import Pipeline
from bot.engine.errors import ConfigError
from bot.engine.messages import Scope
from bot.records.commands import CommandFacts
from bot.records.conversations import ConversationRefs
from bot.records.inbox import InboxItem

if TYPE_CHECKING:
    from aiohttp import web
    from pydantic import SecretStr

    from bot.approvals.desk import ApprovalDesk
    from bot.chat.core.threads import AlertThreads
    from bot.config import Settings
    from bot.engine.service import AgentService
    from bot.engine.spec import AgentProfile


def required(secret: SecretStr | None, missing: str) -> str:
    """A platform's token, or the ConfigError `missing` when it is not set."""
    if secret is None:
        raise ConfigError(missing)
    return secret.get_secret_value()


@dataclass(frozen=True, slots=True)
class PlatformParts:
    """What the composition root hands every platform it builds."""

    settings: Settings
    service: AgentService
    profiles: Mapping[str, AgentProfile]
    claims: EventClaims  # processed_events, for an adapter built without the inbox
    counter: EventCounter | None  # the app's metrics
    inbox: ExactlyOnce | None  # the durable inbox's exactly-once step (bot/chat/core/inbox_turns.py)
    # where a platform that posts only by reference (Teams) keeps them (bot/records/conversations.py)
    conversations: ConversationRefs | None = None
    facts: CommandFacts | None = None  # what `/yokebot status|approvals|alerts|usage` read (docs/commands.md)


class Platform(Protocol):
    """One connected chat platform (Slack, Discord) in `yokebot run`, in the order the runner calls it:
    `mount` (its HTTP routes) and `mount_approvals` when built, `identify` (log in over REST: enough to post
    and to answer the events recovery takes over), `start` (connect and take events), `stop` (stop taking
    events, drain the turns in flight, disconnect). `rebuild` makes an inbox row's `Inbound` again; `post`
    serves notify and schedules; `is_connected` serves /readyz; `alert_threads` is how alerts post (roots,
    notes, edits) through it."""

    platform: str
    pipeline: Pipeline

    def mount(self, http: web.Application) -> None: ...
    def mount_approvals(self, desk: ApprovalDesk) -> None: ...
    async def identify(self) -> object: ...
    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    def rebuild(self, item: InboxItem) -> Inbound: ...
    async def post(self, channel: str, text: str, within: Scope | None = None) -> str: ...
    def is_connected(self) -> bool: ...
    def alert_threads(self) -> AlertThreads: ...
