"""Alert threads on Mattermost (the port: bot/chat/core/threads.py): the root posted like notify's posts, notes
as replies in its thread (the root post's ID is the thread, as for a mention), the root edited in place; every
text through the one gate (bot/chat/mattermost/live.py)."""

from __future__ import annotations

from typing import Any

from bot.chat.core.threads import Root
from bot.chat.mattermost.manifest import PLATFORM
from bot.chat.mattermost.rest import MattermostOutbox


class MattermostAlertThreads:
    platform = PLATFORM

    def __init__(self, outbox: MattermostOutbox) -> None:
        self.outbox = outbox

    async def open(self, channel: str, text: str, title: str) -> Root:
        ref = await self.outbox.post(channel, text)  # mattermost:<channel>/<post>
        channel_id, _, post = ref.removeprefix(f"{PLATFORM}:").partition("/")
        return Root(self.platform, channel_id, post, post)

    async def note(self, root: Root, text: str) -> None:
        await self.outbox.messages.deliver(root.channel, text, root.ref)

    async def edit(self, root: Root, text: str) -> None:
        await self.outbox.messages.patch(root.ref, text)

    def target(self, root: Root) -> tuple[str, dict[str, Any]]:
        return "mention", {"post": root.ref, "root": root.ref, "team": ""}
