"""The registry of chat platforms: for each, whether Settings configure it, how its full adapter (a
`Platform`, bot/chat/core/platform.py) and its posting-only adapter are built, and the hint shown when a post
names it unconfigured. `bot/app.py`, `bot/runner.py` and the notifier loop over it; each builder imports its
package only when called, so a process loads only the platforms it uses.

Posting-only adapters serve a process that posts but does not listen (`yokebot schedule run`): one per
configured platform, registered with the app's notifier so schedules and `notify` reach Slack and Discord
from there too. `yokebot run` does not use these: its full adapters post as well."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.chat.core.approvals import ApprovalDesk
from bot.chat.core.base import ChatAdapter
from bot.chat.core.notifier import AdapterNotifier
from bot.chat.core.platform import Platform, PlatformParts
from bot.config import Settings


@dataclass(frozen=True, slots=True)
class PlatformEntry:
    name: str
    configured: Callable[[Settings], bool]
    build: Callable[[PlatformParts], Platform]
    poster: Callable[[Settings], ChatAdapter]
    hint: str  # how to configure it, for a post that names it in a process where it is not


def _slack(parts: PlatformParts) -> Platform:
    from bot.chat.slack.adapter import SlackAdapter

    return SlackAdapter(parts.settings, parts.service, parts.profiles, parts.claims, parts.counter,
                        inbox=parts.inbox)


def _slack_poster(settings: Settings) -> ChatAdapter:
    from bot.chat.slack.rest import SlackOutbox

    return SlackOutbox(settings)


def _discord(parts: PlatformParts) -> Platform:
    from bot.chat.discord.adapter import DiscordAdapter

    return DiscordAdapter(parts.service, parts.settings, parts.profiles, claims=parts.claims,
                          metrics=parts.counter, inbox=parts.inbox)


def _discord_poster(settings: Settings) -> ChatAdapter:
    from bot.chat.discord.rest import DiscordPoster

    return DiscordPoster(settings)


PLATFORMS: tuple[PlatformEntry, ...] = (
    PlatformEntry("slack", lambda s: s.slack_bot_token is not None, _slack, _slack_poster,
                  "set SLACK_BOT_TOKEN (and SLACK_APP_TOKEN or SLACK_SIGNING_SECRET) and run `yokebot run`"),
    PlatformEntry("discord", lambda s: s.discord_bot_token is not None, _discord, _discord_poster,
                  "set DISCORD_BOT_TOKEN and run `yokebot run`"),
)


def hints() -> dict[str, str]:
    return {entry.name: entry.hint for entry in PLATFORMS}


def configured(settings: Settings) -> list[PlatformEntry]:
    return [entry for entry in PLATFORMS if entry.configured(settings)]


def build_platform(entry: PlatformEntry, parts: PlatformParts, notifier: AdapterNotifier,
                   approvals: ApprovalDesk | None) -> Platform:
    """The platform's full adapter (not connected yet), registered with the notifier so `notify` can post to
    `<platform>:#name` / `<platform>:ID`, with its Approve / Deny buttons (docs/approvals.md)."""
    platform = entry.build(parts)
    notifier.register(platform)
    if approvals is not None:
        platform.mount_approvals(approvals)
    return platform


def posting_adapters(settings: Settings) -> list[ChatAdapter]:
    return [entry.poster(settings) for entry in configured(settings)]


def register_posting_adapters(notifier: AdapterNotifier, settings: Settings) -> list[ChatAdapter]:
    """Register a posting-only adapter for each configured platform not registered yet; returns them (to stop)."""
    added = [a for a in posting_adapters(settings) if a.platform not in notifier.adapters]
    for adapter in added:
        notifier.register(adapter)
    return added
