"""Slack's message operations: every text yokebot sends to Slack passes `SlackMessages` (broadcast pings
defused there, at the last step), and `SlackLiveOps` is one reply's `MessageOps` for the live-progress engine
(bot/chat/core/live.py).

- Status: a message in the thread (chat.postMessage, chat.update), or in an assistant thread the pane's status
  line (assistant.threads.setStatus), which is cleared at the end; the thread is titled after the question.
- The answer as it is written: Slack's chat streaming (chat.startStream / appendStream / stopStream) in a
  thread where the workspace has it; else (no such method, no thread, a stream that must be rewritten) one
  message updated with chat.update. A streamed answer is defused whole (in `SlackMessages`), so a ping split
  across fragments is caught too.
- The final answer in place: the stream finished with the rest of the answer, or the message updated with the
  answer's first mrkdwn part; a very long answer becomes a file (SlackPoster's rules), sent anew.
- Refs noted for recovery are message ts."""

from __future__ import annotations

import logging
from typing import Any, Protocol

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.chat.core.formatting import split_message
from bot.chat.core.live import MessageOps
from bot.chat.slack.manifest import PLATFORM, defuse
from bot.chat.slack.mrkdwn import to_mrkdwn
from bot.chat.slack.web import error_of, web_api

log = logging.getLogger(__name__)

NO_STREAMS = frozenset({"unknown_method", "method_deprecated", "not_allowed_token_type", "missing_scope",
                        "feature_not_enabled", "not_implemented"})


def safe(text: str) -> str:
    return defuse(text)


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlackMessages:
    """The one gate between yokebot and Slack's message methods: each text is defused here."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = web_api(client)

    async def post(self, channel: str, text: str, thread_ts: str | None = None, **extra: Any) -> Any:
        return await self.client.chat_postMessage(channel=channel, text=safe(text), thread_ts=thread_ts,
                                                  unfurl_links=False, unfurl_media=False, **extra)

    async def update(self, channel: str, ts: str, text: str, **extra: Any) -> Any:
        return await self.client.chat_update(channel=channel, ts=ts, text=safe(text), **extra)

    async def delete(self, channel: str, ts: str) -> None:
        await self.client.chat_delete(channel=channel, ts=ts)

    async def ephemeral(self, channel: str, user: str, text: str, thread_ts: str | None) -> None:
        await self.client.chat_postEphemeral(channel=channel, user=user, text=safe(text), thread_ts=thread_ts)

    @staticmethod
    async def respond(response_url: str, text: str, session: aiohttp.ClientSession | None) -> int:
        """A slash command's answer to its caller only, through its `response_url`; the HTTP status."""
        sent = await AsyncWebhookClient(response_url, session=session).send(text=safe(text), response_type="ephemeral")
        return sent.status_code

    # A stream is defused whole, never fragment by fragment, so a ping split across two fragments is caught:
    # each call gets the whole text so far and what the stream holds (`sent`), and sends the difference.
    async def start_stream(self, channel: str, thread_ts: str, markdown: str) -> tuple[str, str]:
        """(the stream's ts, what it holds)."""
        text = safe(markdown)
        resp = await self.client.chat_startStream(channel=channel, thread_ts=thread_ts, markdown_text=text)
        return str(resp["ts"]), text

    async def append_stream(self, channel: str, ts: str, sent: str, markdown: str) -> str | None:
        """What the stream holds now; None: the text does not extend it (rewritten), nothing was sent."""
        text = safe(markdown)
        if not text.startswith(sent):
            return None
        await self.client.chat_appendStream(channel=channel, ts=ts, markdown_text=text[len(sent):])
        return text

    async def stop_stream(self, channel: str, ts: str, sent: str = "", markdown: str | None = None) -> bool:
        """Close the stream, with the rest of `markdown` when it extends what was sent; False: it does not
        (nothing was sent)."""
        rest = None
        if markdown is not None:
            text = safe(markdown)
            if not text.startswith(sent):
                return False
            rest = text[len(sent):]
        await self.client.chat_stopStream(channel=channel, ts=ts, markdown_text=rest or None)
        return True

    async def pane_title(self, channel: str, thread_ts: str, title: str) -> None:
        await self.client.assistant_threads_setTitle(channel_id=channel, thread_ts=thread_ts, title=safe(title))

    async def pane_status(self, channel: str, thread_ts: str, status: str) -> None:
        await self.client.assistant_threads_setStatus(channel_id=channel, thread_ts=thread_ts, status=safe(status))


class SlackRateLimits(Protocol):
    @property
    def message_chars(self) -> int: ...
    @property
    def file_threshold_chars(self) -> int: ...


class Poster(Protocol):
    """`SlackPoster` (bot/chat/slack/output.py), as far as a live reply uses it."""

    messages: SlackMessages
    can_stream: bool | None

    @property
    def limits(self) -> SlackRateLimits: ...
    async def post(self, channel: str, markdown: str, thread_ts: str | None = None) -> list[str]: ...


class SlackLiveOps(MessageOps):
    platform = PLATFORM
    refused = (SlackApiError,)

    def __init__(self, poster: Poster, channel: str, thread_ts: str | None) -> None:
        self.poster, self.messages, self.channel, self.thread_ts = poster, poster.messages, channel, thread_ts
        self.streaming = False  # a Slack stream is open
        self.sent = ""  # the (defused) Markdown the stream holds
        # a threaded DM may be an assistant thread: its status is assistant.threads.setStatus (None: not tried)
        self.assistant: bool | None = None if channel.startswith("D") and thread_ts else False

    async def post(self, text: str) -> str:
        resp = await self.messages.post(self.channel, text, self.thread_ts)
        self.channel = str(resp.get("channel") or self.channel)
        return str(resp["ts"])

    async def edit(self, ref: str, text: str) -> None:
        await self.messages.update(self.channel, ref, text)

    async def delete(self, ref: str) -> None:
        await self.messages.delete(self.channel, ref)

    async def deliver(self, answer: str) -> None:
        await self.poster.post(self.channel, answer, self.thread_ts)

    def parts(self, answer: str) -> list[str] | None:
        if len(answer) > self.poster.limits.file_threshold_chars:
            return None
        return split_message(to_mrkdwn(answer) or " ", self.poster.limits.message_chars)

    def status_text(self, text: str) -> str:
        return escape(text)

    def preview(self, partial: str) -> str:
        text = to_mrkdwn(partial) or "…"
        limit = self.poster.limits.message_chars
        return text if len(text) <= limit else text[: limit - 2] + " …"

    # --- the stream ----------------------------------------------------------------------------------
    async def open_stream(self, partial: str) -> str | None:
        if self.thread_ts is None or self.poster.can_stream is False:
            return None
        try:
            ts, sent = await self.messages.start_stream(self.channel, self.thread_ts, partial)
        except SlackApiError as exc:
            error = error_of(exc)
            if error in NO_STREAMS:
                self.poster.can_stream = False  # this workspace: edits from now on
            log.info("slack: no streaming here (%s); the answer is shown by edits", error)
            return None
        self.poster.can_stream = True
        self.streaming, self.sent = True, sent
        return ts

    async def extend_stream(self, ref: str, partial: str) -> bool:
        if not self.streaming:
            return False
        sent = await self.messages.append_stream(self.channel, ref, self.sent, partial)
        if sent is None:
            return False
        self.sent = sent
        return True

    async def finish_stream(self, ref: str, answer: str) -> bool:
        if not self.streaming or len(to_mrkdwn(answer)) > self.poster.limits.message_chars:
            return False
        finished = await self.messages.stop_stream(self.channel, ref, self.sent, answer)
        self.streaming = not finished
        return finished

    async def close_stream(self, ref: str) -> None:
        if not self.streaming:
            return
        self.streaming = False
        await self.messages.stop_stream(self.channel, ref)

    # --- the assistant pane --------------------------------------------------------------------------
    async def begin(self, question: str) -> None:
        """In an assistant thread: name it after the question (Slack lists the threads by title)."""
        if self.assistant is False or self.thread_ts is None:
            return
        title = " ".join(question.split())
        try:
            await self.messages.pane_title(self.channel, self.thread_ts,
                                           title[:60] + ("…" if len(title) > 60 else ""))
        except SlackApiError as exc:
            log.debug("slack: not an assistant thread (%s)", error_of(exc))
            self.assistant = False

    async def pane_status(self, text: str) -> bool:
        """The status line under the assistant thread ("yokebot is tail_log /var/log/nginx/error.log…")."""
        if self.assistant is False or self.thread_ts is None:
            return False
        line = " · ".join(ln.replace("`", "").strip("_") for ln in text.splitlines()[-2:])  # last step, and now
        try:
            await self.messages.pane_status(self.channel, self.thread_ts, line)
        except SlackApiError as exc:
            log.debug("slack: no assistant status here (%s); a status message instead", error_of(exc))
            self.assistant = False
            return False
        self.assistant = True
        return True

    async def clear_pane(self) -> None:
        """Slack clears an assistant thread's status on a reply, but a stream may have set it again."""
        if self.assistant:
            await self.messages.pane_status(self.channel, self.thread_ts or "", "")
