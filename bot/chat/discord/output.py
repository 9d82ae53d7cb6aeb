"""Putting text on Discord: the 2,000-character limit, a file for very long answers, no pings, typing, and the
reply surface the inbound pipeline uses (a thread opened on the message, typing, ✅/❌), also for a message
rebuilt from its IDs after a restart (`stored_message`: everything over REST, no gateway object)."""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress

import discord
from discord.abc import Messageable

from bot.chat.core.formatting import split_message
from bot.chat.core.live import LiveReply
from bot.chat.core.progress import LiveOptions
from bot.chat.discord.live import LIMIT, NO_PINGS, DiscordLiveOps, attachment_preview, deliver, safe
from bot.engine.errors import ToolFailed

__all__ = ["LIMIT", "NO_PINGS", "DiscordReply", "post_to", "stored_message"]

log = logging.getLogger(__name__)

TYPING_EVERY = 8.0  # Discord shows "typing…" for 10 s after each trigger
DONE, FAILED = "✅", "❌"
THREAD_EXISTS = 160004  # Discord's error code: "A thread has already been created for this message"


async def post_to(dest: Messageable, channel: str, text: str, *, attach_over: int) -> str:
    """notify / scheduled reports: deliver `text` to `dest`; returns `discord:CHANNEL/MESSAGE` of the first
    message. Discord refusing it is one sentence for the model or the run history."""
    try:
        sent = await deliver(dest, text, attach_over=attach_over)
    except discord.HTTPException as exc:
        raise ToolFailed(f"cannot post to discord:{channel}: Discord answered {exc.status} {exc.text}") from None
    return f"discord:{sent[0].channel.id}/{sent[0].id}"


class Typing:
    """Shows "typing…" from start() until stop(). A failed trigger only costs the indicator, never the answer."""

    def __init__(self, dest: Messageable) -> None:
        self.dest = dest
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._keep_typing())

    async def _keep_typing(self) -> None:
        while True:
            try:
                await self.dest.typing()
            except discord.HTTPException as exc:
                log.debug("typing indicator failed: %s", exc)
            await asyncio.sleep(TYPING_EVERY)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task


class DiscordReply(LiveReply):
    """The reply surface for one Discord message. Before `working()` (a refusal, a hint) text replies to the
    message where it was written. `working()` picks where the answer goes: the DM, the thread it came from,
    a new thread on the message (its session), or, inline (`YOKEBOT_DISCORD_REPLY_INLINE`, or no permission to
    open a thread), a reply in the channel. With `progress`, a status message and the answer as it is written
    (bot/chat/core/live.py over `DiscordLiveOps`, bot/chat/discord/live.py).

    `rest`: the message was rebuilt from its IDs (`stored_message`, recovery after a restart), so its thread is
    opened over REST (the gateway may not know its guild yet), or found when the first attempt opened it, and
    the messages a cut turn left are settled over REST."""

    def __init__(self, message: discord.Message | discord.PartialMessage, channel: Messageable, thread: str,
                 title: str, *, opens_thread: bool, inline: bool, attach_over: int,
                 progress: LiveOptions | None = None, rest: discord.Client | None = None) -> None:
        super().__init__(DiscordLiveOps(lambda: (self.dest, self.reference), attach_over, rest), progress)
        self.message, self.dest, self.reference, self.title = message, channel, message, title
        self.rest = rest
        self.thread, self.opens_thread, self.inline, self.attach_over = thread, opens_thread, inline, attach_over
        self.typing = Typing(channel)

    async def working(self) -> str:
        if not self.opens_thread:
            self.reference = None  # a DM or a thread: the answer follows the question there
        elif not self.inline:
            await self._open_thread()
        self.typing = Typing(self.dest)
        self.typing.start()
        return self.thread

    async def _open_thread(self) -> None:
        try:
            if self.rest is not None:
                thread = await thread_over_rest(self.rest, self.message, thread_name(self.title))
            else:
                thread = await self.message.create_thread(name=thread_name(self.title),
                                                          auto_archive_duration=1440)
        except discord.HTTPException as exc:
            log.warning("discord: cannot create a thread on message %s (%s); answering inline",
                        self.message.id, exc)
            self.thread = str(self.message.id)
            return
        self.dest, self.reference, self.thread = thread, None, str(thread.id)

    async def deliver(self, text: str) -> None:
        await self.typing.stop()
        await super().deliver(text)

    async def parked(self) -> None:
        await self.typing.stop()
        await super().parked()

    async def done(self, ok: bool) -> None:
        await self.typing.stop()
        await react(self.message, DONE if ok else FAILED)

    async def shows(self, answer: str) -> bool:
        """A bot's message after the question, where the answer goes (the thread opened on the message, whose ID
        is the message's; else the channel), that begins as `answer` sent would. Over REST: recovery only."""
        if self.rest is None:
            return False
        text = answer.strip() or "(no answer)"
        first = attachment_preview(text) if len(text) > self.attach_over else split_message(text, LIMIT)[0]
        start = safe(first).strip()[:200]
        channel = self.message.id if self.opens_thread and not self.inline else getattr(self.dest, "id", None)
        if channel is None:
            return False
        try:
            found = await self.rest.http.logs_from(channel, 50, after=self.message.id)
        except discord.NotFound:  # no thread was opened on the message: nothing was posted there
            return False
        me = self.rest.user  # this bot's messages only: another bot or a webhook could post the answer's words
        if me is None:
            return False
        return any(str(m.get("author", {}).get("id")) == str(me.id)
                   and str(m.get("content") or "").strip().startswith(start) for m in found)


def stored_message(client: discord.Client, channel: int, message: int, guild: int | None,
                   channel_type: discord.ChannelType | None) -> tuple[discord.PartialMessage, Messageable]:
    """A message known by its IDs (an inbox row), and the channel it was written in: replies, reactions and
    typing go over REST, without the gateway's message object or cache."""
    where = client.get_partial_messageable(channel, guild_id=guild, type=channel_type)
    return where.get_partial_message(message), where


async def thread_over_rest(client: discord.Client, message: discord.Message | discord.PartialMessage,
                           name: str) -> discord.PartialMessageable:
    """Open a thread on the message over REST; if it has one already (a turn run again after a restart, whose
    first attempt opened it), that one: a thread opened on a message has the message's ID."""
    guild = message.guild.id if message.guild is not None else getattr(message.channel, "guild_id", None)
    try:
        data = await client.http.start_thread_with_message(message.channel.id, message.id, name=name,
                                                           auto_archive_duration=1440)
        thread_id = int(data["id"])
    except discord.HTTPException as exc:
        if exc.code != THREAD_EXISTS:
            raise
        thread_id = message.id
    return client.get_partial_messageable(thread_id, guild_id=guild, type=discord.ChannelType.public_thread)


def thread_name(text: str) -> str:
    first = " ".join(text.split())
    return (first[:90] + "…") if len(first) > 90 else (first or "yokebot")


async def react(message: discord.Message | discord.PartialMessage, emoji: str) -> None:
    try:
        await message.add_reaction(emoji)
    except discord.HTTPException as exc:
        log.warning("could not react %s on message %s: %s", emoji, message.id, exc)
