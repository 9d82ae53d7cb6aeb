"""Posting to Teams without listening: the posting-only adapter (`yokebot schedule run`), and the posting half of
the full adapter. A post to a team channel starts a new post there (its reply chain is the thread of whatever
follows); a post to a chat is a message in it. Targets are `#channel-name` or a channel or chat id, resolved
from the stored conversation references (bot/chat/teams/directory.py)."""

from __future__ import annotations

from bot.chat.core.formatting import split_message
from bot.chat.teams.connector import Connector, ConnectorError
from bot.chat.teams.directory import Places
from bot.chat.teams.events import CHANNEL, Place
from bot.chat.teams.live import LIMIT, TeamsMessages, message
from bot.chat.teams.manifest import PLATFORM
from bot.config import Settings
from bot.engine.errors import ToolFailed
from bot.engine.messages import Scope
from bot.records.conversations import ConversationRefs


class TeamsOutbox:
    platform = PLATFORM

    def __init__(self, settings: Settings, conversations: ConversationRefs | None) -> None:
        self.connector = Connector(settings)
        self.messages = TeamsMessages(self.connector)
        self.places = Places(self.connector, conversations)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        await self.connector.close()

    async def post(self, channel: str, text: str, within: Scope | None = None) -> str:
        """Post to `#name` or an id (into `within`'s reply chain when it is that channel); returns
        `teams:<conversation id>/<activity id>` of the first message."""
        channel_id, place = await self.places.resolve(channel)
        parts = split_message(text.strip() or "(no answer)", LIMIT)
        try:
            if place.kind == CHANNEL and within is not None and within.channel == channel_id and within.thread:
                conversation = f"{channel_id};messageid={within.thread}"  # the reply chain, as an alert's notes
                chain = Place(place.service_url, conversation, place.tenant, place.team, CHANNEL)
                first = (await self.messages.deliver(chain, text))[0]
            elif place.kind == CHANNEL:
                conversation, first = await self.connector.new_thread(place.service_url, channel_id, place.tenant,
                                                                      message(parts[0]))
                chain = Place(place.service_url, conversation, place.tenant, place.team, CHANNEL)
                for part in parts[1:]:
                    await self.messages.send(chain, part)
            else:
                conversation = place.conversation
                first = (await self.messages.deliver(place, text))[0]
        except ConnectorError as exc:
            raise ToolFailed(f"Teams refused the post to teams:{channel}: {exc}") from None
        return f"{PLATFORM}:{conversation}/{first}"
