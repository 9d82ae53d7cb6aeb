"""The alerts in `yokebot run` (bot/runner.py): built before the HTTP server starts (its routes), attached to
the chat adapters and the inbox's Recovery once they exist, started once the adapters can post."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from bot.alerts.desk import AlertDesk
from bot.alerts.investigate import PLATFORM, Investigations
from bot.alerts.store import AlertStore
from bot.alerts.threads import AlertThreads
from bot.alerts.webhooks import Webhooks
from bot.app import App
from bot.chat.core.inbox_turns import Resumable


class Alerts:
    def __init__(self, bot: App, token: str) -> None:
        self.bot = bot
        s = bot.settings
        self.store = AlertStore(bot.engine, bot.store.owner, s.inbox_lease_seconds)
        self.desk = AlertDesk(self.store, bot.profiles, {}, None, per_10m=s.alert_max_per_10m,
                              redact=bot.service.loop.executor.redact,  # the one tool output passes
                              counter=bot.metrics, retry_seconds=s.inbox_lease_seconds)
        self.webhooks = Webhooks(self.desk, token)

    def attach(self, resumable: MutableMapping[str, Resumable]) -> None:
        """Post through the chat adapters in `resumable`; add the investigations to it (for the inbox's Recovery)."""
        bot, s = self.bot, self.bot.settings
        chat = dict(resumable)
        self.desk.threads = {p: t for p, a in chat.items() if (t := threads_for(p, a, s.discord_attach_over_chars))}
        if bot.inbox is not None and bot.inbox_turns is not None:
            self.desk.investigations = Investigations(
                bot.service, bot.inbox, bot.inbox_turns, chat, max_concurrent=s.alert_max_concurrent,
                drain_seconds=max(s.slack_drain_seconds, s.discord_drain_seconds), counter=bot.metrics,
                default_agent=s.default_agent)
            resumable[PLATFORM] = self.desk.investigations

    async def start(self, *, alone: bool) -> Callable[[], Awaitable[None]]:
        await self.desk.start(alone=alone, period=self.bot.settings.inbox_lease_seconds / 3)
        return self.desk.stop


def threads_for(platform: str, adapter: Any, attach_over: int) -> AlertThreads | None:
    if platform == "slack":
        from bot.alerts.slack import SlackThreads

        return SlackThreads(adapter.outbox)
    if platform == "discord":
        from bot.alerts.discord import DiscordThreads

        return DiscordThreads(adapter, adapter.client, attach_over)
    return None


def build_alerts(bot: App) -> Alerts | None:
    """None unless YOKEBOT_WEBHOOK_TOKEN is set: the webhooks are never open by default."""
    token = bot.settings.webhook_token
    return Alerts(bot, token.get_secret_value()) if token is not None else None
