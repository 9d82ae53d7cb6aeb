"""The registry of chat platforms: one `PlatformEntry` per platform carries everything shared code needs of it,
taken from the platform's manifest (bot/chat/<platform>/manifest.py): its name, the variable that configures it
and the hint naming it, how its full adapter (a `Platform`, bot/chat/core/platform.py) and its posting-only
adapter (its `…Outbox`) are built, its file hosts, what its IDs look like, how its text is defused, and its
`yokebot doctor` check. The adapters answer the rest themselves (`Platform.alert_threads()`). `bot/app.py`,
`bot/runner.py`, the doctor, `yokebot schedule` and the profile loader ask here; nothing outside the platform
packages and this file names a platform. Each builder imports its package's adapter only when called, so a
process loads only the platforms it uses.

Posting-only adapters serve a process that posts but does not listen (`yokebot schedule run`): one per
configured platform, registered with the app's notifier so schedules and `notify` reach every platform from
there too. `yokebot run` does not use these: its full adapters post as well."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.approvals.desk import ApprovalDesk
from bot.chat.core.base import ChatAdapter
from bot.chat.core.checks import Check
from bot.chat.core.formatting import defuse_at_broadcasts
from bot.chat.core.notifier import AdapterNotifier
from bot.chat.core.platform import Platform, PlatformParts
from bot.chat.discord import manifest as discord_manifest
from bot.chat.mattermost import manifest as mattermost_manifest
from bot.chat.slack import manifest as slack_manifest
from bot.chat.teams import manifest as teams_manifest
from bot.config import Settings


@dataclass(frozen=True, slots=True)
class PlatformEntry:
    name: str
    token_variable: str  # the variable that turns it on
    hint: str  # how to configure it, for a post that names it in a process where it is not
    configured: Callable[[Settings], bool]
    build: Callable[[PlatformParts], Platform]
    outbox: Callable[[PlatformParts], ChatAdapter]  # the posting-only adapter
    file_hosts: tuple[str, ...]  # where its attached files are served from (with its API URL)
    is_id: Callable[[str], bool]  # does an access-list entry look like one of its IDs (not a name)?
    defuse: Callable[[str], str]  # the last step before its API receives a text: no broadcast ping survives
    doctor: Callable[[Settings], Awaitable[list[Check]]]  # `yokebot doctor`: do its tokens work?


def _slack(parts: PlatformParts) -> Platform:
    from bot.chat.slack.adapter import SlackAdapter

    return SlackAdapter(parts)


def _slack_outbox(parts: PlatformParts) -> ChatAdapter:
    from bot.chat.slack.rest import SlackOutbox

    return SlackOutbox(parts.settings)


def _discord(parts: PlatformParts) -> Platform:
    from bot.chat.discord.adapter import DiscordAdapter

    return DiscordAdapter(parts)


def _discord_outbox(parts: PlatformParts) -> ChatAdapter:
    from bot.chat.discord.rest import DiscordOutbox

    return DiscordOutbox(parts.settings)


def _teams(parts: PlatformParts) -> Platform:
    from bot.chat.teams.adapter import TeamsAdapter

    return TeamsAdapter(parts)


def _teams_outbox(parts: PlatformParts) -> ChatAdapter:
    from bot.chat.teams.rest import TeamsOutbox

    return TeamsOutbox(parts.settings, parts.conversations)


def _mattermost(parts: PlatformParts) -> Platform:
    from bot.chat.mattermost.adapter import MattermostAdapter

    return MattermostAdapter(parts)


def _mattermost_outbox(parts: PlatformParts) -> ChatAdapter:
    from bot.chat.mattermost.rest import MattermostOutbox

    return MattermostOutbox(parts.settings)


PLATFORMS: tuple[PlatformEntry, ...] = (
    PlatformEntry(slack_manifest.PLATFORM, slack_manifest.TOKEN_VARIABLE, slack_manifest.HINT,
                  slack_manifest.configured, _slack, _slack_outbox, slack_manifest.FILE_HOSTS,
                  slack_manifest.is_id, slack_manifest.defuse, slack_manifest.doctor),
    PlatformEntry(discord_manifest.PLATFORM, discord_manifest.TOKEN_VARIABLE, discord_manifest.HINT,
                  discord_manifest.configured, _discord, _discord_outbox, discord_manifest.FILE_HOSTS,
                  discord_manifest.is_id, discord_manifest.defuse, discord_manifest.doctor),
    PlatformEntry(teams_manifest.PLATFORM, teams_manifest.TOKEN_VARIABLE, teams_manifest.HINT,
                  teams_manifest.configured, _teams, _teams_outbox, teams_manifest.FILE_HOSTS,
                  teams_manifest.is_id, teams_manifest.defuse, teams_manifest.doctor),
    PlatformEntry(mattermost_manifest.PLATFORM, mattermost_manifest.TOKEN_VARIABLE, mattermost_manifest.HINT,
                  mattermost_manifest.configured, _mattermost, _mattermost_outbox, mattermost_manifest.FILE_HOSTS,
                  mattermost_manifest.is_id, mattermost_manifest.defuse, mattermost_manifest.doctor),
)


def names() -> tuple[str, ...]:
    """What a `post_to`, a `notify:` target or a route may name: pass it to the profile loader."""
    return tuple(entry.name for entry in PLATFORMS)


def is_id(value: str) -> bool:
    """Does `value` look like an ID on some platform (an approver in AGENT.md): pass it to the profile loader."""
    return any(entry.is_id(value) for entry in PLATFORMS)


def entry(name: str) -> PlatformEntry | None:
    return next((e for e in PLATFORMS if e.name == name), None)


def hints() -> dict[str, str]:
    return {entry.name: entry.hint for entry in PLATFORMS}


def configured(settings: Settings) -> list[PlatformEntry]:
    return [entry for entry in PLATFORMS if entry.configured(settings)]


def defuse_broadcasts(text: str, platform: str) -> str:
    """`text` as `platform`'s API may receive it (its manifest's `defuse`); a name that is no chat platform (the
    terminal, an eval's recorder) gets the step every platform shares."""
    found = entry(platform)
    return found.defuse(text) if found is not None else defuse_at_broadcasts(text)


def build_platform(entry: PlatformEntry, parts: PlatformParts, notifier: AdapterNotifier,
                   approvals: ApprovalDesk | None) -> Platform:
    """The platform's full adapter (not connected yet), registered with the notifier so `notify` can post to
    `<platform>:#name` / `<platform>:ID`, with its Approve / Deny buttons (docs/approvals.md)."""
    platform = entry.build(parts)
    notifier.register(platform)
    if approvals is not None:
        platform.mount_approvals(approvals)
    return platform


def posting_adapters(parts: PlatformParts) -> list[ChatAdapter]:
    return [entry.outbox(parts) for entry in configured(parts.settings)]


def register_posting_adapters(notifier: AdapterNotifier, parts: PlatformParts) -> list[ChatAdapter]:
    """Register a posting-only adapter for each configured platform not registered yet; returns them (to stop)."""
    added = [a for a in posting_adapters(parts) if a.platform not in notifier.adapters]
    for adapter in added:
        notifier.register(adapter)
    return added
