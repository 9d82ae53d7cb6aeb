"""Alert threads on Slack (the port: bot/chat/core/threads.py): the root through the outbox's post (channel
names resolved, broadcasts defused), notes as replies in its thread, edits with chat.update (the same mrkdwn
conversion and defusing as every post)."""

from __future__ import annotations

from typing import Any

from bot.chat.core.threads import Root
from bot.chat.slack.manifest import PLATFORM
from bot.chat.slack.mrkdwn import to_mrkdwn
from bot.chat.slack.rest import SlackOutbox


class SlackAlertThreads:
    platform = PLATFORM

    def __init__(self, outbox: SlackOutbox) -> None:
        self.outbox = outbox

    async def open(self, channel: str, text: str, title: str) -> Root:
        ref = await self.outbox.post(channel, text)  # slack:<channel id>:<ts>
        _, channel_id, ts = ref.split(":", 2)
        return Root(self.platform, channel_id, ts, ts)  # a thread's session key is its root's ts, as a mention's

    async def note(self, root: Root, text: str) -> None:
        await self.outbox.poster.post(root.channel, text, root.ref)

    async def edit(self, root: Root, text: str) -> None:
        await self.outbox.poster.messages.update(root.channel, root.ref, to_mrkdwn(text))  # the one gate defuses

    def target(self, root: Root) -> tuple[str, dict[str, Any]]:
        return "mention", {"ts": root.ref, "reply_thread": root.ref}
