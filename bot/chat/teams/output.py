"""The reply surface for one Teams message: "typing…" while working, the answer in the conversation it came from
(a channel's reply chain, a group chat, a personal chat), with live progress when it is on. Teams lets a bot
neither react nor thread a chat, so there is no ✅/❌ mark: the answer (or the failure sentence) is the end."""

from __future__ import annotations

import logging

from bot.chat.core.live import LiveReply
from bot.chat.core.progress import LiveOptions
from bot.chat.teams.connector import ConnectorError
from bot.chat.teams.events import Place
from bot.chat.teams.live import TeamsLiveOps, TeamsMessages

log = logging.getLogger(__name__)


class TeamsReply(LiveReply):
    def __init__(self, messages: TeamsMessages, place: Place, thread: str,
                 progress: LiveOptions | None = None) -> None:
        super().__init__(TeamsLiveOps(messages, place), progress)
        self.messages, self.place, self.thread = messages, place, thread

    async def working(self) -> str:
        try:
            await self.messages.typing(self.place)
        except ConnectorError as exc:  # the indicator only: never the answer
            log.info("teams: typing indicator in %s: %s", self.place.conversation, exc)
        return self.thread

    async def done(self, ok: bool) -> None:
        return None
