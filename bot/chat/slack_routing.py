"""Who may talk to the bot where (allow-lists by immutable ID), which agent answers in which channel, and
channel names -> IDs (conversations.list, cached)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from slack_sdk.web.async_client import AsyncWebClient

from bot.engine.profiles import AgentProfile

log = logging.getLogger(__name__)


def slack_entries(entries: Iterable[str]) -> set[str]:
    """Profile lists are cross-platform: keep `C123` and `slack:C123`, drop `discord:…`."""
    out: set[str] = set()
    for entry in entries:
        platform, sep, rest = entry.partition(":")
        if not sep:
            out.add(entry)
        elif platform == "slack":
            out.add(rest)
    return out


class ChannelDirectory:
    """Channel name <-> ID for channels the bot can see. Refreshed on a miss, at most every `min_age` s."""

    def __init__(self, client: AsyncWebClient, min_age: float = 60.0) -> None:
        self.client = client
        self.min_age = min_age
        self._by_name: dict[str, str] = {}
        self._loaded_at = float("-inf")

    async def _refresh(self) -> None:
        if time.monotonic() - self._loaded_at < self.min_age:
            return
        names: dict[str, str] = {}
        cursor: str | None = None
        while True:
            resp = await self.client.conversations_list(
                types="public_channel,private_channel", exclude_archived=True, limit=1000, cursor=cursor)
            for ch in resp.get("channels") or []:
                names[str(ch["name"])] = str(ch["id"])
            cursor = (resp.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                break
        self._by_name, self._loaded_at = names, time.monotonic()

    async def id_for(self, name: str) -> str | None:
        name = name.lstrip("#")
        if name not in self._by_name:
            await self._refresh()
        return self._by_name.get(name)


class Router:
    """The agent for a channel: the first profile (by name) whose `channels` lists it, else the default."""

    def __init__(self, profiles: Mapping[str, AgentProfile], default_agent: str, directory: ChannelDirectory):
        self.profiles, self.default_agent, self.directory = profiles, default_agent, directory

    async def agent_for(self, channel: str) -> str:
        for name in sorted(self.profiles):
            for entry in sorted(slack_entries(self.profiles[name].channels)):
                if entry == channel:
                    return name
                if entry.startswith("#") and await self._resolves_to(entry, channel):
                    return name
        return self.default_agent

    async def _resolves_to(self, entry: str, channel: str) -> bool:
        try:
            return await self.directory.id_for(entry) == channel
        except Exception:  # a missing scope must not stop routing by ID
            log.warning("cannot resolve Slack channel %s for routing", entry, exc_info=True)
            return False


@dataclass(frozen=True)
class AccessPolicy:
    users: frozenset[str] = frozenset()
    channels: frozenset[str] = frozenset()
    allow_dms: bool = True

    def refusal(self, user: str | None, channel: str, dm: bool, profile: AgentProfile | None) -> str | None:
        """Why this user may not use the bot here (for the log), or None when allowed."""
        agent = profile.name if profile else ""
        profile_users = slack_entries(profile.access.users) if profile else set()
        profile_channels = slack_entries(profile.access.channels) if profile else set()
        if self.users and user not in self.users:
            return f"user {user} is not in YOKEBOT_SLACK_ALLOWED_USERS"
        if profile_users and user not in profile_users:
            return f"user {user} is not in the access.users of agent {agent}"
        if dm:
            return None if self.allow_dms else "direct messages are turned off (YOKEBOT_SLACK_ALLOW_DMS)"
        if self.channels and channel not in self.channels:
            return f"channel {channel} is not in YOKEBOT_SLACK_ALLOWED_CHANNELS"
        if profile_channels and channel not in profile_channels:
            return f"channel {channel} is not in the access.channels of agent {agent}"
        return None
