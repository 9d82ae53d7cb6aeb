"""Putting text on Discord: the 2,000-character limit, a file for very long answers, no pings, typing, and the
reply surface the inbound pipeline uses (a thread opened on the message, typing, ✅/❌), also for a message
rebuilt from its IDs after a restart (`stored_message`: everything over REST, no gateway object)."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import Any

import discord
from discord.abc import Messageable

from bot.chat.core.formatting import defuse_broadcasts, split_message
from bot.chat.core.progress import LiveOptions, Progress
from bot.chat.discord.live import DiscordLive, settle_leftovers
from bot.engine.errors import ToolFailed
from bot.engine.inbox import LiveKind

log = logging.getLogger(__name__)

LIMIT = 2000
NO_PINGS = discord.AllowedMentions.none()  # the model must never ping @everyone, a role or a user
TYPING_EVERY = 8.0  # Discord shows "typing…" for 10 s after each trigger
ATTACHMENT_NAME = "answer.md"
DONE, FAILED = "✅", "❌"
THREAD_EXISTS = 160004  # Discord's error code: "A thread has already been created for this message"


def attachment_preview(text: str, name: str = ATTACHMENT_NAME) -> str:
    head = split_message(text, LIMIT - 200)[0]
    return f"{head}\n\n*The full answer ({len(text):,} characters) is attached as `{name}`.*"


async def deliver(
    dest: Messageable, text: str, *, attach_over: int, reference: discord.Message | discord.PartialMessage | None = None
) -> list[discord.Message]:
    """Send `text` as messages of at most 2,000 characters (split on line / code-fence boundaries), or as a
    preview plus a Markdown file when it is longer than `attach_over`. The first message replies to
    `reference` when one is given (without pinging its author)."""
    text = text.strip() or "(no answer)"
    if len(text) > attach_over:
        file = discord.File(io.BytesIO(text.encode("utf-8")), filename=ATTACHMENT_NAME)
        return [await _send(dest, attachment_preview(text), reference, file)]
    sent: list[discord.Message] = []
    for i, chunk in enumerate(split_message(text, LIMIT)):
        sent.append(await _send(dest, chunk, reference if i == 0 else None))
    return sent


async def post_to(dest: Messageable, channel: str, text: str, *, attach_over: int) -> str:
    """notify / scheduled reports: deliver `text` to `dest`; returns `discord:CHANNEL/MESSAGE` of the first
    message. Discord refusing it is one sentence for the model or the run history."""
    try:
        sent = await deliver(dest, text, attach_over=attach_over)
    except discord.HTTPException as exc:
        raise ToolFailed(f"cannot post to discord:{channel}: Discord answered {exc.status} {exc.text}") from None
    return f"discord:{sent[0].channel.id}/{sent[0].id}"


async def _send(
    dest: Messageable, content: str, reference: discord.Message | discord.PartialMessage | None,
    file: discord.File | None = None,
) -> discord.Message:
    extra: dict[str, Any] = {}
    if reference is not None:
        extra.update(reference=reference, mention_author=False)
    if file is not None:
        extra["file"] = file
    # allowed_mentions already pings nobody; the text must not even read as a ping (quoted, copied, forwarded)
    return await dest.send(defuse_broadcasts(content, "discord"), allowed_mentions=NO_PINGS, **extra)


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


class DiscordReply:
    """The reply surface for one Discord message. Before `working()` (a refusal, a hint) text replies to the
    message where it was written. `working()` picks where the answer goes: the DM, the thread it came from,
    a new thread on the message (its session), or, inline (`YOKEBOT_DISCORD_REPLY_INLINE`, or no permission to
    open a thread), a reply in the channel.

    `rest`: the message was rebuilt from its IDs (`stored_message`, recovery after a restart), so its thread is
    opened over REST (the gateway may not know its guild yet), or found when the first attempt opened it."""

    def __init__(self, message: discord.Message | discord.PartialMessage, channel: Messageable, thread: str,
                 title: str, *, opens_thread: bool, inline: bool, attach_over: int,
                 progress: LiveOptions | None = None, rest: discord.Client | None = None) -> None:
        self.message, self.dest, self.reference, self.title = message, channel, message, title
        self.rest = rest
        self.thread, self.opens_thread, self.inline, self.attach_over = thread, opens_thread, inline, attach_over
        self.typing = Typing(channel)
        self.live = DiscordLive(lambda: (self.dest, self.reference), self._deliver_whole, attach_over) \
            if progress is not None else None  # a status message and the answer as it is written
        self.hooks = Progress(self.live, progress.mode, progress.interval) \
            if self.live is not None and progress is not None else None

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
        if self.hooks is not None and self.live is not None:
            await self.hooks.close()
            await self.live.final(text, self.hooks.summary())
        else:
            await self._deliver_whole(text)

    async def _deliver_whole(self, text: str) -> None:
        await deliver(self.dest, text, attach_over=self.attach_over, reference=self.reference)

    async def done(self, ok: bool) -> None:
        await self.typing.stop()
        await react(self.message, DONE if ok else FAILED)

    # --- the durable inbox (bot/chat/core/inbox_turns.py) --------------------------------------------------------
    def track(self, note: Callable[[LiveKind, str], Awaitable[None]]) -> None:
        """Tell `note` of every message sent to show this turn (status, partial answer) as it is sent."""
        if self.live is not None:
            self.live.on_message = note

    async def leftovers(self, live: Mapping[LiveKind, str]) -> None:
        """A turn for this message ran in a process that is gone: settle the messages it left (discord_live.py).
        Recovery asks this of a rebuilt reply (`rest`), whose client edits and deletes over REST."""
        if self.rest is None:
            log.debug("discord: no REST client on this reply; the messages of a cut turn are left as they are")
            return
        await settle_leftovers(self.rest, live)


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
