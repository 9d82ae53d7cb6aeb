"""What yokebot looks up in Slack, cached: channel names <-> IDs (conversations.list), the user groups a user
is in (usergroups.list), and whether the bot is part of a thread (conversations.replies)."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.chat.slack.web import error_of, fields, listed, web_api

log = logging.getLogger(__name__)

THREADS_MAX = 10_000


class ChannelDirectory:
    """Channel name <-> ID for channels the bot can see. Refreshed on a miss, at most every `min_age` s."""

    def __init__(self, client: AsyncWebClient, min_age: float = 60.0) -> None:
        self.client = web_api(client)
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
            for ch in listed(resp.get("channels")):
                names[str(ch["name"])] = str(ch["id"])
            cursor = fields(resp.get("response_metadata")).get("next_cursor") or None
            if not cursor:
                break
        self._by_name, self._loaded_at = names, time.monotonic()

    async def id_for(self, name: str) -> str | None:
        name = name.lstrip("#")
        if name not in self._by_name:
            await self._refresh()
        return self._by_name.get(name)

    async def name_for(self, channel_id: str) -> str | None:
        """The channel's current name (routing by `#name`); None when unknown or the lookup fails."""
        try:
            if channel_id not in self._by_name.values():
                await self._refresh()
        except Exception:  # a missing scope must not stop routing by ID
            log.warning("cannot read Slack channel names for routing", exc_info=True)
            return None
        return next((name for name, cid in self._by_name.items() if cid == channel_id), None)


class UserGroups:
    """The user groups (`S…` IDs) a user is in, from usergroups.list (one call, cached `min_age` s). Asked only
    when an access list names groups. A failed lookup counts as "in no group": access fails closed."""

    def __init__(self, client: AsyncWebClient, min_age: float = 60.0) -> None:
        self.client, self.min_age = web_api(client), min_age
        self._members: dict[str, frozenset[str]] = {}  # user -> groups
        self._loaded_at = float("-inf")

    async def of(self, user: str) -> frozenset[str]:
        if time.monotonic() - self._loaded_at >= self.min_age:
            try:
                resp = await self.client.usergroups_list(include_users=True)
            except SlackApiError as exc:
                log.warning("cannot read Slack user groups (%s): users are taken to be in none",
                            error_of(exc))
                return frozenset()
            members: dict[str, set[str]] = {}
            for group in listed(resp.get("usergroups")):
                for member in listed(group.get("users")):
                    members.setdefault(str(member), set()).add(str(group["id"]))
            self._members = {u: frozenset(g) for u, g in members.items()}
            self._loaded_at = time.monotonic()
        return self._members.get(user, frozenset())


class ThreadMemory:
    """Threads the bot answered or was mentioned in; after a restart read back with conversations.replies."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = web_api(client)
        self._threads: OrderedDict[tuple[str, str], None] = OrderedDict()

    def remember(self, channel: str, thread: str) -> None:
        self._threads[(channel, thread)] = None
        self._threads.move_to_end((channel, thread))
        while len(self._threads) > THREADS_MAX:
            self._threads.popitem(last=False)

    async def bot_posted(self, channel: str, thread_ts: str, *, after: str, starting: str, user_id: str,
                         bot_id: str | None) -> bool:
        """Whether a message of this bot (its user or bot ID: not any bot's, which another app could post)
        after `after` in the thread begins with `starting` (raises when the thread cannot be read: the caller
        decides)."""
        resp = await self.client.conversations_replies(channel=channel, ts=thread_ts, oldest=after, limit=200)
        return any((m.get("user") == user_id or (bot_id and m.get("bot_id") == bot_id))
                   and float(str(m.get("ts") or 0)) > float(after)
                   and str(m.get("text") or "").strip().startswith(starting)
                   for m in listed(resp.get("messages")))

    async def bot_in(self, channel: str, thread_ts: str, user_id: str, bot_id: str | None) -> bool:
        if (channel, thread_ts) in self._threads:
            return True
        try:
            resp = await self.client.conversations_replies(channel=channel, ts=thread_ts, limit=200)
        except SlackApiError as exc:
            log.info("cannot read thread %s in %s: %s", thread_ts, channel, error_of(exc))
            return False
        for m in listed(resp.get("messages")):
            if m.get("user") == user_id or (bot_id and m.get("bot_id") == bot_id) \
                    or f"<@{user_id}" in str(m.get("text") or ""):
                self.remember(channel, thread_ts)
                return True
        return False
