"""Alert threads on Teams (the port: bot/chat/core/threads.py): the root is a new post in the channel (its reply
chain is the session's thread, as a mention's is), notes are replies in that chain, edits update the root in
place; every text through the one gate (bot/chat/teams/live.py)."""

from __future__ import annotations

from typing import Any

from bot.chat.core.threads import Root
from bot.chat.teams.directory import Places
from bot.chat.teams.events import CHANNEL, Place
from bot.chat.teams.live import TeamsMessages, message
from bot.chat.teams.manifest import PLATFORM
from bot.engine.errors import ToolFailed


class TeamsAlertThreads:
    platform = PLATFORM

    def __init__(self, messages: TeamsMessages, places: Places) -> None:
        self.messages, self.places = messages, places

    async def open(self, channel: str, text: str, title: str) -> Root:
        channel_id, place = await self.places.resolve(channel)
        if place.kind != CHANNEL:
            raise ToolFailed(f"teams:{channel} is a chat, not a team channel: alert threads open in channels")
        _, activity = await self.messages.connector.new_thread(place.service_url, channel_id, place.tenant,
                                                               message(text))
        return Root(self.platform, channel_id, activity, activity)

    async def _chain(self, root: Root) -> Place:
        found = await self.places.place(root.channel)
        if found is None:
            raise ToolFailed(f"no conversation reference for teams:{root.channel}")
        return Place(found.service_url, f"{root.channel};messageid={root.thread}", found.tenant, found.team, CHANNEL)

    async def note(self, root: Root, text: str) -> None:
        await self.messages.deliver(await self._chain(root), text)

    async def edit(self, root: Root, text: str) -> None:
        await self.messages.update(await self._chain(root), root.ref, text)

    def target(self, root: Root) -> tuple[str, dict[str, Any]]:
        """The investigation answers in the root's reply chain (`open` looked the channel's reference up)."""
        found = self.places.known(root.channel)
        if found is None:
            return "mention", {"activity": root.ref}
        chain = Place(found.service_url, f"{root.channel};messageid={root.thread}", found.tenant, found.team, CHANNEL)
        return "mention", {"activity": root.ref, **chain.json()}
