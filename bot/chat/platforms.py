"""Posting-only adapters, for a process that posts but does not listen (`yokebot schedule run`): one per
platform whose token is configured, registered with the app's notifier so schedules and `notify` reach
Slack and Discord from there too. `yokebot run` does not use these: its full adapters post as well."""

from __future__ import annotations

from bot.chat.core.base import ChatAdapter
from bot.chat.core.notifier import AdapterNotifier
from bot.config import Settings


def posting_adapters(settings: Settings) -> list[ChatAdapter]:
    adapters: list[ChatAdapter] = []
    if settings.slack_bot_token is not None:
        from bot.chat.slack.rest import SlackOutbox

        adapters.append(SlackOutbox(settings))
    if settings.discord_bot_token is not None:
        from bot.chat.discord.rest import DiscordPoster

        adapters.append(DiscordPoster(settings))
    return adapters


def register_posting_adapters(notifier: AdapterNotifier, settings: Settings) -> list[ChatAdapter]:
    """Register a posting-only adapter for each configured platform not registered yet; returns them (to stop)."""
    added = [a for a in posting_adapters(settings) if a.platform not in notifier.adapters]
    for adapter in added:
        notifier.register(adapter)
    return added
