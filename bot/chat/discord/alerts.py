"""Alert threads on Discord (the port: bot/chat/core/threads.py): the root posted like notify's posts, a thread
opened on it over REST (its ID is the session's thread, as for a mention), notes sent into the thread, the root
edited in place; no pings, ever."""

from __future__ import annotations

from typing import Any

import discord

from bot.chat.core.base import ChatAdapter
from bot.chat.core.threads import Root
from bot.chat.discord.live import NO_PINGS, deliver, safe
from bot.chat.discord.manifest import PLATFORM
from bot.chat.discord.output import thread_name, thread_over_rest
from bot.redact import printable


class DiscordAlertThreads:
    platform = PLATFORM

    def __init__(self, poster: ChatAdapter, client: discord.Client, attach_over: int) -> None:
        self.poster, self.client, self.attach_over = poster, client, attach_over

    async def open(self, channel: str, text: str, title: str) -> Root:
        ref = await self.poster.post(channel, text)  # discord:<channel>/<message>
        channel_id, _, message_id = ref.removeprefix(f"{PLATFORM}:").partition("/")
        message = self.client.get_partial_messageable(int(channel_id)).get_partial_message(int(message_id))
        # the title is the alertname, shown like the root's values (bot/alerts/render.py): a bidi override in it
        # made the thread list read otherwise than it is
        thread = await thread_over_rest(self.client, message, thread_name(f"Alert: {printable(title)}"))
        return Root(self.platform, channel_id, message_id, str(thread.id))

    async def note(self, root: Root, text: str) -> None:
        await deliver(self.client.get_partial_messageable(int(root.thread)), text, attach_over=self.attach_over)

    async def edit(self, root: Root, text: str) -> None:
        message = self.client.get_partial_messageable(int(root.channel)).get_partial_message(int(root.ref))
        await message.edit(content=safe(text), allowed_mentions=NO_PINGS)

    def target(self, root: Root) -> tuple[str, dict[str, Any]]:
        # answered in the thread (a follow-up's surface); the message is the root, which the thread starts from
        return "thread", {"message": root.ref, "channel": root.thread, "guild": None, "roles": []}
