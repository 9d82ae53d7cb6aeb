"""Live progress in Slack for one reply (the `LiveSurface` of `bot/chat/core/progress.py`), and its final answer.

- Status: one message in the thread, posted with chat.postMessage and changed with chat.update as the turn
  moves. When the turn is over it becomes the list of tool steps, or is deleted when there is none to keep.
- The answer as it is written: Slack's chat streaming (chat.startStream / appendStream / stopStream) in a
  thread where the workspace has it; else (no such method, no thread, a stream that must be rewritten) one
  message updated with chat.update. The pump calls at most about once a second.
- The final answer is always the complete, converted one: the streamed or updated message is finished or
  replaced by the answer's first mrkdwn part, further parts follow as new messages, a very long answer
  becomes a file (SlackPoster's rules). If the message cannot be changed, the answer is posted anew: a 429
  (retried by the SDK) or a lost message never loses the final text.
- After a crash: the status message and the partly written answer were noted on the message's inbox row as
  they were posted (`on_message`); recovery calls `settle_leftovers` before the message is answered again.
  The status message becomes a short restart note (deleting it would make the steps the user watched vanish
  without a word), and the half answer is deleted (it would read as the answer; the whole one follows)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.chat.core.formatting import defuse_broadcasts, split_message
from bot.chat.core.progress import RESTARTED_STATUS
from bot.chat.slack.mrkdwn import to_mrkdwn
from bot.engine.inbox import LiveKind

log = logging.getLogger(__name__)

NO_STREAMS = frozenset({"unknown_method", "method_deprecated", "not_allowed_token_type", "missing_scope",
                        "feature_not_enabled", "not_implemented"})


class Limits(Protocol):
    @property
    def message_chars(self) -> int: ...
    @property
    def file_threshold_chars(self) -> int: ...


class Poster(Protocol):
    """`SlackPoster` (bot/chat/slack/output.py), as far as a live reply uses it."""

    client: AsyncWebClient
    can_stream: bool | None

    @property
    def limits(self) -> Limits: ...
    async def post(self, channel: str, markdown: str, thread_ts: str | None = None) -> list[str]: ...


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def safe(text: str) -> str:
    """Every text this module sends goes through here: no broadcast ping survives (as SlackPoster does)."""
    return defuse_broadcasts(text, "slack")


class SlackLive:
    def __init__(self, poster: Poster, channel: str, thread_ts: str | None) -> None:
        self.poster, self.client, self.channel, self.thread_ts = poster, poster.client, channel, thread_ts
        self.status_ts: str | None = None
        self.answer_ts: str | None = None
        self.streaming = False  # answer_ts is a Slack stream still open
        self.sent = ""  # the Markdown the stream holds
        # a threaded DM may be an assistant thread: its status is assistant.threads.setStatus (None: not tried)
        self.assistant: bool | None = None if channel.startswith("D") and thread_ts else False
        # told of each message posted to show the turn (the inbox notes it, for recovery after a crash)
        self.on_message: Callable[[LiveKind, str], Awaitable[None]] | None = None

    # --- while the turn runs ---------------------------------------------------------------------------
    async def begin(self, question: str) -> None:
        """In an assistant thread: name it after the question (Slack lists the threads by title)."""
        if self.assistant is False or self.thread_ts is None:
            return
        title = " ".join(question.split())
        try:
            await self.client.assistant_threads_setTitle(channel_id=self.channel, thread_ts=self.thread_ts,
                                                         title=safe(title[:60] + ("…" if len(title) > 60 else "")))
        except SlackApiError as exc:
            log.debug("slack: not an assistant thread (%s)", exc.response.get("error"))
            self.assistant = False

    async def status(self, text: str) -> None:
        if self.assistant is not False and await self._assistant_status(text):
            return
        if self.status_ts is None:
            self.status_ts = await self._post(escape(text))
            await self._noted("status", self.status_ts)
        else:
            await self.client.chat_update(channel=self.channel, ts=self.status_ts, text=safe(escape(text)))

    async def stream(self, partial: str) -> None:
        partial = safe(partial)  # defused whole, so a ping split across two fragments is caught too
        if self.answer_ts is None:
            if not await self._start_stream(partial):
                self.answer_ts = await self._post(self._preview(partial))
            if self.answer_ts is not None:
                await self._noted("answer", self.answer_ts)
            return
        if self.streaming and partial.startswith(self.sent):
            await self.client.chat_appendStream(channel=self.channel, ts=self.answer_ts,
                                                markdown_text=partial[len(self.sent):])
            self.sent = partial
            return
        await self._stop_stream()  # rewritten (a retried model call): an update replaces the text
        await self.client.chat_update(channel=self.channel, ts=self.answer_ts, text=safe(self._preview(partial)))

    async def _noted(self, kind: LiveKind, ts: str) -> None:
        if self.on_message is None:
            return
        try:
            await self.on_message(kind, ts)
        except Exception:  # a courtesy for recovery: never fails the progress, let alone the turn
            log.warning("could not note the %s message %s of a turn", kind, ts, exc_info=True)

    async def _assistant_status(self, text: str) -> bool:
        """The status line under the assistant thread ("yokebot is tail_log /var/log/nginx/error.log…")."""
        assert self.thread_ts is not None
        line = " · ".join(ln.replace("`", "").strip("_") for ln in text.splitlines()[-2:])  # last step, and now
        try:
            await self.client.assistant_threads_setStatus(channel_id=self.channel, thread_ts=self.thread_ts,
                                                          status=safe(line))
        except SlackApiError as exc:
            log.debug("slack: no assistant status here (%s); a status message instead", exc.response.get("error"))
            self.assistant = False
            return False
        self.assistant = True
        return True

    def _preview(self, partial: str) -> str:
        text = to_mrkdwn(partial) or "…"
        limit = self.poster.limits.message_chars
        return text if len(text) <= limit else text[: limit - 2] + " …"

    async def _post(self, text: str) -> str:
        resp = await self.client.chat_postMessage(channel=self.channel, text=safe(text), thread_ts=self.thread_ts,
                                                  unfurl_links=False, unfurl_media=False)
        self.channel = str(resp.get("channel") or self.channel)
        return str(resp["ts"])

    async def _start_stream(self, partial: str) -> bool:
        if self.thread_ts is None or self.poster.can_stream is False:
            return False
        try:
            resp = await self.client.chat_startStream(channel=self.channel, thread_ts=self.thread_ts,
                                                      markdown_text=partial)
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            if error in NO_STREAMS:
                self.poster.can_stream = False  # this workspace: edits from now on
            log.info("slack: no streaming here (%s); the answer is shown by edits", error)
            return False
        self.poster.can_stream = True
        self.answer_ts, self.streaming, self.sent = str(resp["ts"]), True, partial
        return True

    async def _stop_stream(self, rest: str | None = None) -> None:
        if not self.streaming or self.answer_ts is None:
            return
        self.streaming = False
        await self.client.chat_stopStream(channel=self.channel, ts=self.answer_ts, markdown_text=rest or None)

    # --- the end ----------------------------------------------------------------------------------------
    async def final(self, markdown: str, summary: str | None) -> None:
        await self._settle_status(summary)
        if self.answer_ts is None:
            await self.poster.post(self.channel, markdown, self.thread_ts)
            return
        try:
            await self._finish_answer(markdown)
        except SlackApiError as exc:
            log.warning("slack: could not finish the streamed answer (%s); posting it anew",
                        exc.response.get("error"))
            old, self.answer_ts = self.answer_ts, None
            await self.poster.post(self.channel, markdown, self.thread_ts)
            with contextlib.suppress(SlackApiError):
                await self.client.chat_delete(channel=self.channel, ts=old)

    async def _finish_answer(self, markdown: str) -> None:
        assert self.answer_ts is not None
        limits = self.poster.limits
        streamed = safe(markdown)
        if len(markdown) > limits.file_threshold_chars:
            raise SlackApiError("a file answer replaces the partial one", {"error": "too_long_for_update"})
        if self.streaming and streamed.startswith(self.sent) and len(to_mrkdwn(markdown)) <= limits.message_chars:
            await self._stop_stream(streamed[len(self.sent):])  # the stream was the answer: finish it
            return
        await self._stop_stream()
        chunks = split_message(to_mrkdwn(markdown) or " ", limits.message_chars)
        await self.client.chat_update(channel=self.channel, ts=self.answer_ts, text=safe(chunks[0]))
        for chunk in chunks[1:]:
            await self._post(chunk)

    async def _settle_status(self, summary: str | None) -> None:
        """The status message becomes the list of steps, or goes away. Best effort: never fails the answer.
        An assistant thread's status is cleared (Slack clears it on a reply, but a stream may have set it again)."""
        if self.assistant:
            with contextlib.suppress(SlackApiError):
                await self.client.assistant_threads_setStatus(channel_id=self.channel, thread_ts=self.thread_ts or "",
                                                              status="")
        if self.status_ts is None:
            return
        ts, self.status_ts = self.status_ts, None
        try:
            if summary:
                await self.client.chat_update(channel=self.channel, ts=ts, text=safe(escape(summary)))
            else:
                await self.client.chat_delete(channel=self.channel, ts=ts)
        except SlackApiError as exc:
            log.info("slack: could not settle the status message: %s", exc.response.get("error"))


async def settle_leftovers(client: AsyncWebClient, channel: str, live: Mapping[LiveKind, str]) -> None:
    """What a turn cut short by a crash left in the thread: its status message (maybe still "thinking…") says
    that the bot was restarted; its partly written answer, streamed or edited, is deleted (or, if Slack refuses,
    marked as cut). Best effort: the message is answered either way."""
    if (status := live.get("status")) is not None:
        try:
            await client.chat_update(channel=channel, ts=status, text=RESTARTED_STATUS)
        except SlackApiError as exc:
            log.info("slack: could not settle the status message left by a restart: %s", exc.response.get("error"))
    if (answer := live.get("answer")) is not None:
        try:
            await client.chat_delete(channel=channel, ts=answer)
        except SlackApiError as exc:
            log.info("slack: could not delete the half answer left by a restart (%s); marking it",
                     exc.response.get("error"))
            with contextlib.suppress(SlackApiError):
                await client.chat_update(channel=channel, ts=answer, text=RESTARTED_STATUS)
