"""Discord's message operations: every text yokebot sends to Discord passes `send` or `edit` here (pings
defused at the last step, and `allowed_mentions` pinging nobody), and `DiscordLiveOps` is one reply's
`MessageOps` for the live-progress engine (bot/chat/core/live.py).

- The whole answer (`deliver`): messages of at most 2,000 characters (split on line / code-fence boundaries),
  or a preview plus a Markdown file when it is longer than `attach_over`.
- Status and the answer as it is written: two messages of their own (the answer is never written into the
  status message), edited (PATCH /channels/{c}/messages/{m}) at the pump's pace, under Discord's 5 edits per
  5 s per channel (discord.py waits out a 429 itself). Typing goes on meanwhile (DiscordReply).
- Refs noted for recovery are `CHANNEL/MESSAGE` (the message may be in the thread the turn opened); a reply
  rebuilt after a restart edits and deletes them over REST (`rest`), a 404 is skipped."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from typing import Any

import discord
from discord.abc import Messageable

from bot.chat.core.formatting import split_message
from bot.chat.core.live import MessageOps
from bot.chat.discord.manifest import PLATFORM, defuse

log = logging.getLogger(__name__)

LIMIT = 2000
NO_PINGS = discord.AllowedMentions.none()  # the model must never ping @everyone, a role or a user
ATTACHMENT_NAME = "answer.md"
AnyMessage = discord.Message | discord.PartialMessage
# where the reply goes, and what it answers (a message rebuilt from its IDs is a PartialMessage)
Where = Callable[[], tuple[Messageable, AnyMessage | None]]


def safe(text: str) -> str:
    """allowed_mentions already pings nobody; the text must not even read as a ping (quoted, copied, forwarded)."""
    return defuse(text)


async def send(dest: Messageable, content: str, reference: AnyMessage | None = None, **extra: Any) -> discord.Message:
    """The one gate for a new message."""
    if reference is not None:
        extra.update(reference=reference, mention_author=False)
    return await dest.send(safe(content), allowed_mentions=NO_PINGS, **extra)


async def edit(message: AnyMessage, content: str, **extra: Any) -> discord.Message:
    """The one gate for a changed message."""
    return await message.edit(content=safe(content), allowed_mentions=NO_PINGS, **extra)


async def answer_privately(interaction: discord.Interaction, content: str) -> None:
    """The gate for an ephemeral answer to a click (callback type 4, flags 64)."""
    await interaction.response.send_message(safe(content), ephemeral=True, allowed_mentions=NO_PINGS)


async def follow_up(interaction: discord.Interaction, content: str, *, ephemeral: bool) -> None:
    """The gate for a follow-up of a deferred interaction (a command's answer; ephemeral: the caller only)."""
    await interaction.followup.send(safe(content), ephemeral=ephemeral, allowed_mentions=NO_PINGS)


async def answer_with_edit(interaction: discord.Interaction, content: str, **extra: Any) -> None:
    """The gate for a click answered with the clicked message changed (callback type 7)."""
    await interaction.response.edit_message(content=safe(content), allowed_mentions=NO_PINGS, **extra)


def attachment_preview(text: str, name: str = ATTACHMENT_NAME) -> str:
    head = split_message(safe(text), LIMIT - 200)[0]  # defused first, as in `deliver`
    return f"{head}\n\n*The full answer ({len(text):,} characters) is attached as `{name}`.*"


async def deliver(dest: Messageable, text: str, *, attach_over: int,
                  reference: AnyMessage | None = None) -> list[discord.Message]:
    """Send `text` as messages of at most 2,000 characters, or as a preview plus a Markdown file when it is
    longer than `attach_over`. The first message replies to `reference` when one is given (no ping)."""
    text = text.strip() or "(no answer)"
    if len(text) > attach_over:
        file = discord.File(io.BytesIO(text.encode("utf-8")), filename=ATTACHMENT_NAME)
        return [await send(dest, attachment_preview(text), reference, file=file)]
    sent: list[discord.Message] = []
    # defused before it is split: a word joiner after each `@here` lengthened a full message past Discord's limit
    for i, chunk in enumerate(split_message(safe(text), LIMIT)):
        sent.append(await send(dest, chunk, reference if i == 0 else None))
    return sent


def ref(message: discord.Message) -> str:
    """How a live message is noted on the inbox row: its channel (a thread, a DM, a channel) and its ID."""
    return f"{message.channel.id}/{message.id}"


class DiscordLiveOps(MessageOps):
    platform = PLATFORM
    refused = (discord.HTTPException,)

    def __init__(self, where: Where, attach_over: int, rest: discord.Client | None = None) -> None:
        self.where, self.attach_over, self.rest = where, attach_over, rest
        self._sent: dict[str, AnyMessage] = {}  # the messages this reply sent, by ref

    async def post(self, text: str) -> str:
        dest, reference = self.where()
        message = await send(dest, text, reference if not self._sent else None)  # the first replies to the question
        self._sent[ref(message)] = message
        return ref(message)

    async def edit(self, ref: str, text: str) -> None:
        message = self._message(ref)
        if message is not None:
            self._sent[ref] = await edit(message, text)

    async def delete(self, ref: str) -> None:
        message = self._message(ref)
        if message is not None:
            await message.delete()

    def _message(self, noted: str) -> AnyMessage | None:
        """A message this reply sent, or one noted on the inbox row (over REST, for a rebuilt reply)."""
        if (found := self._sent.get(noted)) is not None:
            return found
        channel, _, message = noted.partition("/")
        if self.rest is None or not (channel.isdigit() and message.isdigit()):
            log.debug("discord: the message %r is not one this reply can reach; left as it is", noted)
            return None
        return self.rest.get_partial_messageable(int(channel)).get_partial_message(int(message))

    async def deliver(self, answer: str) -> None:
        dest, reference = self.where()
        await deliver(dest, answer, attach_over=self.attach_over, reference=reference)

    def parts(self, answer: str) -> list[str] | None:
        text = answer.strip() or "(no answer)"
        return None if len(text) > self.attach_over else split_message(text, LIMIT)

    def preview(self, partial: str) -> str:
        text = partial.strip() or "…"
        return text if len(text) <= LIMIT else text[: LIMIT - 2] + " …"
