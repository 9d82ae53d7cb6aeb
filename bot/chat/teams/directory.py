"""What yokebot knows of Teams' conversations: the stored conversation reference of every channel and chat a
message came from (`Places`: in memory, and in the `conversation_refs` table, so proactive posts work after a
restart and from any instance), channel names (routing by `#name`, `post_to: teams:#ops-alerts`) from the Bot
Connector's list of a team's channels, and no groups (AAD groups would need Microsoft Graph: access lists and
approvers name users by AAD object id)."""

from __future__ import annotations

import logging
import time

from bot.chat.teams.connector import Connector, ConnectorError
from bot.chat.teams.events import CHANNEL, Place, channel_of
from bot.chat.teams.manifest import PLATFORM
from bot.engine.errors import ToolFailed
from bot.records.conversations import ConversationRefs

log = logging.getLogger(__name__)

LIST_EVERY_SECONDS = 60.0  # a team's channels are listed at most this often (an unknown name looks again)


class Places:
    """Conversation references by channel id (a team channel) or conversation id (a chat)."""

    def __init__(self, connector: Connector, store: ConversationRefs | None) -> None:
        self.connector, self.store = connector, store
        self._known: dict[str, Place] = {}
        self._names: dict[str, str] = {}  # channel id -> name, from the connector's lists
        self._listed: dict[str, float] = {}  # team id -> when its channels were last listed
        self._channels: dict[str, Place] = {}  # channels seen in those lists

    @staticmethod
    def key(place: Place) -> tuple[str, Place]:
        """A channel's reference is kept without its reply chain (a proactive post starts a new one)."""
        if place.kind != CHANNEL:
            return place.conversation, place
        channel = channel_of(place.conversation)[0]
        return channel, Place(place.service_url, channel, place.tenant, place.team, CHANNEL)

    async def learn(self, place: Place, name: str | None = None) -> None:
        """A validated activity came from `place`: store its reference if it is new or changed."""
        key, ref = self.key(place)
        if self._known.get(key) == ref and (name is None or self._names.get(key) == name):
            return
        self._known[key] = ref
        if name:
            self._names[key] = name
        if self.store is not None:
            try:
                await self.store.remember(PLATFORM, key, ref.json(), name)
            except Exception:  # the reply still works; a proactive post here waits for the next message
                log.warning("teams: could not store the conversation reference of %s", key, exc_info=True)

    def known(self, conversation: str) -> Place | None:
        return self._known.get(conversation)

    async def place(self, conversation: str) -> Place | None:
        if (found := self._known.get(conversation)) is not None:
            return found
        ref = await self.store.recall(PLATFORM, conversation) if self.store is not None else None
        if ref is None:
            return None
        self._known[conversation] = Place.of(ref)
        return self._known[conversation]

    async def resolve(self, channel: str) -> tuple[str, Place]:
        """A post's target, `#name` or an id, as (id, reference); ToolFailed with what to do when unknown."""
        name = channel.strip()
        if not name.startswith("#"):
            found = await self.place(name)
            if found is None:
                raise ToolFailed(f"cannot post to teams:{channel}: yokebot has no conversation reference for it "
                                 "yet; mention the bot there once (or add it to the team), then try again")
            return name, found
        wanted = name.removeprefix("#").lower()
        for conversation, ref in await self._teams():
            if (self._names.get(conversation) or "").lower() == wanted:
                await self.learn(ref, self._names[conversation])  # posted to by id from now on, on any instance
                return conversation, ref
        raise ToolFailed(f"cannot post to teams:{channel}: no channel of that name in the teams the bot has "
                         "seen; use the channel id, or mention the bot in that team once")

    async def _teams(self) -> list[tuple[str, Place]]:
        """Every channel of every team with a stored reference (names refreshed from the connector)."""
        stored = await self.store.every(PLATFORM) if self.store is not None else []
        refs = {conversation: Place.of(ref) for conversation, _, ref in stored} | self._known
        for conversation, name, _ in stored:
            if name:
                self._names.setdefault(conversation, name)
        teams = {(p.team, p.service_url, p.tenant) for p in refs.values() if p.kind == CHANNEL and p.team}
        for team, service_url, tenant in teams:
            assert team is not None
            if time.monotonic() - self._listed.get(team, -LIST_EVERY_SECONDS) < LIST_EVERY_SECONDS:
                continue
            self._listed[team] = time.monotonic()
            try:
                listed = await self.connector.channels(service_url, team)
            except ConnectorError as exc:
                log.warning("teams: cannot list the channels of team %s: %s", team, exc)
                continue
            for channel, channel_name in listed:
                self._names[channel] = channel_name
                self._channels[channel] = Place(service_url, channel, tenant, team, CHANNEL)
        return [(c, p) for c, p in (self._channels | refs).items() if p.kind == CHANNEL]

    async def channel_name(self, channel: str) -> str | None:
        if channel not in self._names:
            await self._teams()
        return self._names.get(channel)

    async def groups_of(self, user: str) -> frozenset[str]:
        return frozenset()
