"""Live progress on Discord for one reply (the `LiveSurface` of `bot/chat/progress.py`), and its final answer.

- Status: one message, sent, then edited (PATCH /channels/{c}/messages/{m}) as the turn moves; when the turn
  is over it becomes the list of tool steps, or is deleted when there is none to keep. Typing goes on
  meanwhile (DiscordReply).
- The answer as it is written: one message, edited as it grows (at most about once a second: the pump's
  pace, under Discord's 5 edits per 5 s per channel; discord.py waits out a 429 itself).
- The final answer: the 2,000-character split applies: the answer message becomes the first part, further
  parts follow; a very long answer is sent as a file and the partial message is deleted. An edit that fails
  sends the whole answer anew, so the final text is never lost."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

import discord
from discord.abc import Messageable

from bot.chat.formatting import defuse_broadcasts, split_message

log = logging.getLogger(__name__)

LIMIT = 2000
NO_PINGS = discord.AllowedMentions.none()
# where the reply goes, and what it answers (a message rebuilt from its IDs is a PartialMessage)
Where = Callable[[], tuple[Messageable, discord.Message | discord.PartialMessage | None]]


def safe(text: str) -> str:
    """Every text this module sends goes through here: allowed_mentions pings nobody, and the text must not
    even read as a ping (as discord_output does)."""
    return defuse_broadcasts(text, "discord")


def preview(partial: str) -> str:
    text = partial.strip() or "…"
    return text if len(text) <= LIMIT else text[: LIMIT - 2] + " …"


class DiscordLive:
    def __init__(self, where: Where, deliver_whole: Callable[[str], Awaitable[None]], attach_over: int) -> None:
        self.where, self.deliver_whole, self.attach_over = where, deliver_whole, attach_over
        self.status_message: discord.Message | None = None
        self.answer_message: discord.Message | None = None

    async def _send(self, text: str) -> discord.Message:
        dest, reference = self.where()
        if reference is not None and self.status_message is None and self.answer_message is None:
            return await dest.send(safe(text), allowed_mentions=NO_PINGS, reference=reference, mention_author=False)
        return await dest.send(safe(text), allowed_mentions=NO_PINGS)

    async def status(self, text: str) -> None:
        if self.status_message is None:
            self.status_message = await self._send(text)
        else:
            self.status_message = await self.status_message.edit(content=safe(text), allowed_mentions=NO_PINGS)

    async def stream(self, partial: str) -> None:
        if self.answer_message is None:
            self.answer_message = await self._send(preview(partial))
        else:
            self.answer_message = await self.answer_message.edit(content=safe(preview(partial)),
                                                                 allowed_mentions=NO_PINGS)

    async def final(self, text: str, summary: str | None) -> None:
        await self._settle_status(summary)
        text = text.strip() or "(no answer)"
        message, self.answer_message = self.answer_message, None
        if message is None:
            await self.deliver_whole(text)
            return
        if len(text) > self.attach_over:  # a file: sent anew, the partial message goes
            await self.deliver_whole(text)
            await _delete(message)
            return
        chunks = split_message(text, LIMIT)
        try:
            await message.edit(content=safe(chunks[0]), allowed_mentions=NO_PINGS)
        except discord.HTTPException as exc:
            log.warning("discord: could not finish the answer in place (%s); sending it anew", exc)
            await self.deliver_whole(text)
            await _delete(message)
            return
        dest, _ = self.where()
        for chunk in chunks[1:]:
            await dest.send(safe(chunk), allowed_mentions=NO_PINGS)

    async def _settle_status(self, summary: str | None) -> None:
        message, self.status_message = self.status_message, None
        if message is None:
            return
        try:
            if summary:
                await message.edit(content=safe(summary), allowed_mentions=NO_PINGS)
            else:
                await message.delete()
        except discord.HTTPException as exc:
            log.info("discord: could not settle the status message: %s", exc)


async def _delete(message: discord.Message) -> None:
    with contextlib.suppress(discord.HTTPException):
        await message.delete()
