"""Live progress on Discord for one reply (the `LiveSurface` of `bot/chat/core/progress.py`), and its final answer.

- Status: one message, sent, then edited (PATCH /channels/{c}/messages/{m}) as the turn moves; when the turn
  is over it becomes the list of tool steps, or is deleted when there is none to keep. Typing goes on
  meanwhile (DiscordReply).
- The answer as it is written: one message, edited as it grows (at most about once a second: the pump's
  pace, under Discord's 5 edits per 5 s per channel; discord.py waits out a 429 itself).
- The final answer: the 2,000-character split applies: the answer message becomes the first part, further
  parts follow; a very long answer is sent as a file and the partial message is deleted. An edit that fails
  sends the whole answer anew, so the final text is never lost.
- After a crash: the status message and the partly written answer (two messages of their own: the answer is
  never written into the status message) were noted on the message's inbox row as they were sent
  (`on_message`, ref `CHANNEL/MESSAGE`: the message may be in the thread the turn opened). Recovery calls
  `settle_leftovers`, over REST, before the message is answered again: the status message becomes Slack's
  restart note, the half answer is deleted (the whole one follows)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping

import discord
from discord.abc import Messageable

from bot.chat.core.formatting import defuse_broadcasts, split_message
from bot.chat.core.progress import RESTARTED_STATUS
from bot.engine.inbox import LiveKind

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
        # told of each message sent to show the turn (the inbox notes it, for recovery after a crash)
        self.on_message: Callable[[LiveKind, str], Awaitable[None]] | None = None

    async def _send(self, text: str) -> discord.Message:
        dest, reference = self.where()
        if reference is not None and self.status_message is None and self.answer_message is None:
            return await dest.send(safe(text), allowed_mentions=NO_PINGS, reference=reference, mention_author=False)
        return await dest.send(safe(text), allowed_mentions=NO_PINGS)

    async def status(self, text: str) -> None:
        if self.status_message is None:
            self.status_message = await self._send(text)
            await self._noted("status", self.status_message)
        else:
            self.status_message = await self.status_message.edit(content=safe(text), allowed_mentions=NO_PINGS)

    async def stream(self, partial: str) -> None:
        if self.answer_message is None:
            self.answer_message = await self._send(preview(partial))
            await self._noted("answer", self.answer_message)
        else:
            self.answer_message = await self.answer_message.edit(content=safe(preview(partial)),
                                                                 allowed_mentions=NO_PINGS)

    async def _noted(self, kind: LiveKind, message: discord.Message) -> None:
        if self.on_message is None:
            return
        try:
            await self.on_message(kind, ref(message))
        except Exception:  # a courtesy for recovery: never fails the progress, let alone the turn
            log.warning("could not note the %s message %s of a turn", kind, message.id, exc_info=True)

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


def ref(message: discord.Message) -> str:
    """How a live message is noted on the inbox row: its channel (a thread, a DM, a channel) and its ID."""
    return f"{message.channel.id}/{message.id}"


def stored(client: discord.Client, noted: str) -> discord.PartialMessage | None:
    """A noted message (`ref`), to edit or delete over REST; None for a ref this module did not write."""
    channel, _, message = noted.partition("/")
    if not (channel.isdigit() and message.isdigit()):
        return None
    return client.get_partial_messageable(int(channel)).get_partial_message(int(message))


async def settle_leftovers(client: discord.Client, live: Mapping[LiveKind, str]) -> None:
    """What a turn cut short by a crash left: its status message (maybe still "thinking…") says that the bot
    was restarted; its partly written answer is deleted (or, if Discord refuses, marked as cut). Over REST
    only (a rebuilt reply has no gateway objects). A message someone deleted meanwhile is fine. Best effort:
    the message is answered either way."""
    if (status := _leftover(client, live, "status")) is not None:
        try:
            await status.edit(content=RESTARTED_STATUS, allowed_mentions=NO_PINGS)
        except discord.NotFound:
            log.debug("discord: the status message %s left by a restart is gone", status.id)
        except discord.HTTPException as exc:
            log.info("discord: could not settle the status message left by a restart: %s", exc)
    if (answer := _leftover(client, live, "answer")) is not None:
        try:
            await answer.delete()
        except discord.NotFound:
            log.debug("discord: the half answer %s left by a restart is gone", answer.id)
        except discord.HTTPException as exc:
            log.info("discord: could not delete the half answer left by a restart (%s); marking it", exc)
            with contextlib.suppress(discord.HTTPException):
                await answer.edit(content=RESTARTED_STATUS, allowed_mentions=NO_PINGS)


def _leftover(client: discord.Client, live: Mapping[LiveKind, str], kind: LiveKind) -> discord.PartialMessage | None:
    noted = live.get(kind)
    if noted is None:
        return None
    found = stored(client, noted)
    if found is None:
        log.debug("discord: the %s message noted as %r is not a Discord message ref", kind, noted)
    return found


async def _delete(message: discord.Message) -> None:
    with contextlib.suppress(discord.HTTPException):
        await message.delete()
