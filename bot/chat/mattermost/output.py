"""The reply surface for one Mattermost post: 👀 on the post and "typing…" while working, the answer in its thread
(a DM not in a thread: in the DM), then ✅ or ❌. Everything goes over REST from plain IDs, so a reply rebuilt
from an inbox row after a restart is the same object."""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress

from bot.chat.core.formatting import split_message
from bot.chat.core.live import LiveReply
from bot.chat.core.progress import LiveOptions
from bot.chat.mattermost.api import MattermostError
from bot.chat.mattermost.live import LIMIT, MattermostLiveOps, MattermostMessages, attachment_preview, defuse

log = logging.getLogger(__name__)

WORKING, DONE, FAILED = "eyes", "white_check_mark", "x"
TYPING_EVERY = 4.0  # Mattermost shows "typing…" for about 5 s after each event


class MattermostReply(LiveReply):
    def __init__(self, messages: MattermostMessages, me: str, channel: str, post: str, thread: str, root: str,
                 progress: LiveOptions | None = None) -> None:
        """`post`: the message answered; `thread`: the session's thread; `root`: where answers go ("" inline)."""
        super().__init__(MattermostLiveOps(messages, channel, root), progress)
        self.messages, self.me, self.channel, self.post, self.thread, self.root = (
            messages, me, channel, post, thread, root)
        self._typing: asyncio.Task[None] | None = None

    async def working(self) -> str:
        await self._mark(WORKING)
        self._typing = asyncio.create_task(self._keep_typing())
        return self.thread

    async def _keep_typing(self) -> None:
        while True:
            try:
                await self.messages.api.typing(self.me, self.channel, self.root)
            except MattermostError as exc:
                log.debug("mattermost: typing indicator failed: %s", exc)
            await asyncio.sleep(TYPING_EVERY)

    async def _stop_typing(self) -> None:
        task, self._typing = self._typing, None
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

    async def deliver(self, text: str) -> None:
        await self._stop_typing()
        await super().deliver(text)

    async def parked(self) -> None:
        await self._stop_typing()
        await super().parked()

    async def done(self, ok: bool) -> None:
        await self._stop_typing()
        await self._mark(WORKING, remove=True)
        await self._mark(DONE if ok else FAILED)

    async def shows(self, answer: str) -> bool:
        """A post of the bot's in the answer's thread, after the question, that begins as `answer` posted would."""
        if not self.root:  # answered inline: not looked for
            return False
        text = answer.strip() or "(no answer)"
        first = attachment_preview(text) if len(text) > self.messages.attach_over else split_message(text, LIMIT)[0]
        start = defuse(first).strip()[:200]
        posts = await self.messages.api.thread(self.root)
        asked = next((int(p.get("create_at") or 0) for p in posts if p.get("id") == self.post), None)
        if asked is None:
            return False
        return any(p.get("user_id") == self.me and int(p.get("create_at") or 0) > asked
                   and str(p.get("message") or "").strip().startswith(start) for p in posts)

    async def _mark(self, emoji: str, remove: bool = False) -> None:
        """Best effort: a reaction that cannot be set must not fail the turn."""
        try:
            await self.messages.api.react(self.me, self.post, emoji, remove)
        except MattermostError as exc:
            log.info("mattermost: reaction %s on %s: %s", emoji, self.post, exc)
