"""Live progress in chat, written once for every platform: one reply's status message, its answer as it is
written, the final answer in place, and what a turn cut by a crash left behind.

A platform supplies only its message operations (`MessageOps`: post, edit, delete, the whole answer under its
rules, and optionally a stream and a side pane); every text a platform receives passes through them, so its
defences (`defuse_broadcasts`) sit in one place per platform: `bot/chat/slack/live.py`,
`bot/chat/discord/live.py`.

- Status: one message, posted, then edited as the turn moves (`Progress` throttles to about a call a second);
  when the turn has answered it is deleted (with `full` steps it becomes the list of steps and their results);
  while the turn waits for an approval it becomes the steps so far. A
  platform may show it in a side pane instead (Slack's assistant thread status).
- The answer as it is written: the platform's stream where it has one (Slack's chat streaming), else one
  message of its own (never the status message) edited as it grows.
- The final answer is always the complete one under the platform's rules: it replaces the partial message
  (a finished stream, or its first part by an edit, further parts as new messages); an answer that must be
  sent anew (a file), or an edit the platform refuses, is delivered whole and the partial message deleted,
  so the final text is never lost.
- After a crash: each message posted to show the turn was noted on the inbox row as it was posted
  (`on_message`); recovery calls `settle_leftovers` before the message is answered again: the status message
  becomes a short restart note (deleting it would make the steps the user watched vanish without a word) and
  the half answer is deleted (it would read as the answer; the whole one follows)."""

from __future__ import annotations

import contextlib
import logging
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Mapping

from bot.chat.core.base import ReplySurface
from bot.chat.core.progress import RESTARTED_STATUS, LiveOptions, Progress
from bot.records.inbox import LiveKind

log = logging.getLogger(__name__)


class MessageOps:
    """One reply's messages on one platform: the single place its outgoing texts pass. `refused`: the
    exceptions that mean the platform refused a call (the engine falls back; anything else propagates)."""

    platform: str = ""
    refused: tuple[type[Exception], ...] = ()

    @abstractmethod
    async def post(self, text: str) -> str:
        """Post a message in the reply's place; returns its reference (what the inbox row notes)."""

    @abstractmethod
    async def edit(self, ref: str, text: str) -> None: ...

    @abstractmethod
    async def delete(self, ref: str) -> None: ...

    @abstractmethod
    async def deliver(self, answer: str) -> None:
        """The whole answer as new messages under the platform's rules (its split, a file when very long)."""

    @abstractmethod
    def parts(self, answer: str) -> list[str] | None:
        """The final answer's messages when it can replace the partial one in place; None: send it anew."""

    def status_text(self, text: str) -> str:
        """The status in the platform's markup."""
        return text

    @abstractmethod
    def preview(self, partial: str) -> str:
        """The answer so far, as one message (cut to the platform's size limit)."""

    # --- optional: a stream for the answer -------------------------------------------------------------
    async def open_stream(self, partial: str) -> str | None:
        """Start streaming the answer; its reference, or None: no stream here (a message is edited instead)."""
        return None

    async def extend_stream(self, ref: str, partial: str) -> bool:
        """Append to an open stream; False when there is none or the text was rewritten (an edit replaces it)."""
        return False

    async def finish_stream(self, ref: str, answer: str) -> bool:
        """Close an open stream whose text is the answer's beginning with the rest of it; False: not that case."""
        return False

    async def close_stream(self, ref: str) -> None:
        """Close an open stream as it is (an edit follows)."""
        return None

    # --- optional: a side pane for the status -----------------------------------------------------------
    async def begin(self, question: str) -> None:
        """Once, before the first status (Slack names an assistant thread after the question)."""
        return None

    async def pane_status(self, text: str) -> bool:
        """Show the status in a side pane; False: there is none, a status message is used."""
        return False

    async def clear_pane(self) -> None:
        return None


class LiveMessages:
    """The state machine of one reply's live messages (the `LiveSurface` of `Progress`), over `MessageOps`."""

    def __init__(self, ops: MessageOps) -> None:
        self.ops = ops
        self.status_ref: str | None = None
        self.answer_ref: str | None = None
        # told of each message posted to show the turn (the inbox notes it, for recovery after a crash)
        self.on_message: Callable[[LiveKind, str], Awaitable[None]] | None = None

    async def begin(self, question: str) -> None:
        await self.ops.begin(question)

    async def status(self, text: str) -> None:
        if await self.ops.pane_status(text):
            return
        shown = self.ops.status_text(text)
        if self.status_ref is None:
            self.status_ref = await self.ops.post(shown)
            await self._noted("status", self.status_ref)
        else:
            await self.ops.edit(self.status_ref, shown)

    async def stream(self, partial: str) -> None:
        if self.answer_ref is None:
            ref = await self.ops.open_stream(partial)
            self.answer_ref = ref if ref is not None else await self.ops.post(self.ops.preview(partial))
            await self._noted("answer", self.answer_ref)
            return
        if await self.ops.extend_stream(self.answer_ref, partial):
            return
        await self.ops.close_stream(self.answer_ref)  # rewritten (a retried model call): an edit replaces it
        await self.ops.edit(self.answer_ref, self.ops.preview(partial))

    async def _noted(self, kind: LiveKind, ref: str) -> None:
        if self.on_message is None:
            return
        try:
            await self.on_message(kind, ref)
        except Exception:  # a courtesy for recovery: never fails the progress, let alone the turn
            log.warning("could not note the %s message %s of a turn", kind, ref, exc_info=True)

    async def final(self, answer: str, summary: str | None) -> None:
        await self._settle_status(summary)
        ref, self.answer_ref = self.answer_ref, None
        if ref is None:
            await self.ops.deliver(answer)
            return
        try:
            parts = self.ops.parts(answer)
            if parts is None:  # a file: sent anew, the partial message goes
                await self._anew(answer, ref)
                return
            if await self.ops.finish_stream(ref, answer):  # the stream was the answer: finished
                return
            await self.ops.close_stream(ref)
            await self.ops.edit(ref, parts[0])
            for part in parts[1:]:
                await self.ops.post(part)
        except self.ops.refused as exc:
            log.warning("%s: could not finish the answer in place (%s); sending it anew", self.ops.platform, exc)
            await self._anew(answer, ref)

    async def _anew(self, answer: str, ref: str) -> None:
        await self.ops.deliver(answer)
        with contextlib.suppress(*self.ops.refused):
            await self.ops.delete(ref)

    async def parked(self, summary: str | None) -> None:
        """The turn parked on an approval: the status becomes the steps so far (or goes), a half answer goes."""
        await self._settle_status(summary)
        ref, self.answer_ref = self.answer_ref, None
        if ref is not None:
            with contextlib.suppress(*self.ops.refused):
                await self.ops.close_stream(ref)
                await self.ops.delete(ref)

    async def _settle_status(self, summary: str | None) -> None:
        """The status message becomes the list of steps, or goes away. Best effort: never fails the answer."""
        with contextlib.suppress(*self.ops.refused):
            await self.ops.clear_pane()
        ref, self.status_ref = self.status_ref, None
        if ref is None:
            return
        try:
            if summary:
                await self.ops.edit(ref, self.ops.status_text(summary))
            else:
                await self.ops.delete(ref)
        except self.ops.refused as exc:
            log.info("%s: could not settle the status message: %s", self.ops.platform, exc)


async def settle_leftovers(ops: MessageOps, live: Mapping[LiveKind, str]) -> None:
    """What a turn cut short by a crash left in the thread: its status message (maybe still "thinking…") says
    that the bot was restarted; its partly written answer, streamed or edited, is deleted (or, if the platform
    refuses, marked as cut). Best effort: the message is answered either way (a message gone meanwhile too)."""
    if (status := live.get("status")) is not None:
        try:
            await ops.edit(status, RESTARTED_STATUS)
        except ops.refused as exc:
            log.info("%s: could not settle the status message left by a restart: %s", ops.platform, exc)
    if (answer := live.get("answer")) is not None:
        try:
            await ops.delete(answer)
        except ops.refused as exc:
            log.info("%s: could not delete the half answer left by a restart (%s); marking it", ops.platform, exc)
            with contextlib.suppress(*ops.refused):
                await ops.edit(answer, RESTARTED_STATUS)


class LiveReply(ReplySurface):
    """A reply surface with live progress (Slack's and Discord's): `deliver`, `track` and `leftovers` written
    once. A platform's subclass builds its `MessageOps` and adds `working()`, `done()` and its own marks."""

    def __init__(self, ops: MessageOps, progress: LiveOptions | None) -> None:
        self.ops = ops
        self.live = LiveMessages(ops) if progress is not None else None
        self.progress = Progress(self.live, progress.mode, progress.interval, begin=self.live.begin) \
            if self.live is not None and progress is not None else None
        self.hooks = self.progress

    async def deliver(self, text: str) -> None:
        if self.progress is not None and self.live is not None:
            await self.progress.close()
            await self.live.final(text, self.progress.kept())
        else:
            await self.ops.deliver(text)

    async def parked(self) -> None:
        if self.progress is not None and self.live is not None:
            await self.progress.close()
            await self.live.parked(self.progress.summary())

    def track(self, note: Callable[[LiveKind, str], Awaitable[None]]) -> None:
        if self.live is not None:
            self.live.on_message = note

    async def leftovers(self, live: Mapping[LiveKind, str]) -> None:
        await settle_leftovers(self.ops, live)
