"""The alerts in `yokebot run` (bot/runner.py): built once the chat platforms are built (not connected yet) and
before the HTTP server starts (its routes), each platform's alert threads given to the desk then; the
investigations added to the inbox's Recovery; started once the adapters can post."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Protocol

from bot.alerts.desk import AlertDesk
from bot.alerts.incidents import Incidents, Summaries
from bot.alerts.investigate import PLATFORM, Investigations
from bot.alerts.store import AlertStore
from bot.alerts.webhooks import Webhooks
from bot.chat.core.inbox_turns import InboxTurns, Resumable
from bot.chat.core.platform import Platform
from bot.config import Settings
from bot.engine.service import AgentService
from bot.engine.spec import AgentProfile
from bot.records.inbox import Inbox

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from bot.observability.metrics import Metrics
    from bot.store.repositories import SqlStore


class AlertParts(Protocol):
    """What the alerts need of the app (`bot.app.App` has them): alerts do not import the composition root."""

    @property
    def settings(self) -> Settings: ...
    @property
    def engine(self) -> AsyncEngine: ...
    @property
    def store(self) -> SqlStore: ...
    @property
    def profiles(self) -> Mapping[str, AgentProfile]: ...
    @property
    def service(self) -> AgentService: ...
    @property
    def inbox(self) -> Inbox: ...
    @property
    def inbox_turns(self) -> InboxTurns: ...
    @property
    def metrics(self) -> Metrics | None: ...


class Alerts:
    def __init__(self, bot: AlertParts, token: str, platforms: Sequence[Platform]) -> None:
        self.bot = bot
        s = bot.settings
        self.store = AlertStore(bot.engine, bot.store.owner, s.inbox_lease_seconds)
        redact = bot.service.loop.executor.redact  # the one tool output passes
        loop = bot.service.loop
        self.incidents = Incidents(self.store, redact, Summaries(loop.model, loop.default_model, bot.service.hooks))
        self.investigations = Investigations(
            bot.service, bot.inbox, bot.inbox_turns, {p.platform: p for p in platforms},
            max_concurrent=s.alert_max_concurrent,
            drain_seconds=max((p.pipeline.limits.drain_seconds for p in platforms), default=0.0),
            counter=bot.metrics, default_agent=s.default_agent,  # answered through the platform the route names
            record=self.store.record_given, answered=self.incidents.answered)
        self.desk = AlertDesk(self.store, bot.profiles, {p.platform: p.alert_threads() for p in platforms},
                              self.investigations, per_10m=s.alert_max_per_10m, redact=redact,
                              counter=bot.metrics, retry_seconds=s.inbox_lease_seconds, incidents=self.incidents)
        self.webhooks = Webhooks(self.desk, token)

    def attach(self, resumable: MutableMapping[str, Resumable]) -> None:
        """Add the investigations to `resumable` (for the inbox's Recovery)."""
        resumable[PLATFORM] = self.investigations

    async def start(self, *, alone: bool) -> Callable[[], Awaitable[None]]:
        await self.desk.start(alone=alone, period=self.bot.settings.inbox_lease_seconds / 3)
        return self.desk.stop


def build_alerts(bot: AlertParts, platforms: Sequence[Platform]) -> Alerts | None:
    """None unless YOKEBOT_WEBHOOK_TOKEN is set: the webhooks are never open by default. `platforms`: the chat
    platforms built (bot/app.py `build_platforms`), not connected yet."""
    token = bot.settings.webhook_token
    return Alerts(bot, token.get_secret_value(), platforms) if token is not None else None
