"""Writing to Slack: answers as mrkdwn split under the message limit (or a file when very long), the
progress reactions on the message being answered, and the reply surface the pipeline uses. 429s are retried
by the SDK (RateLimitErrorRetryHandler)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.chat.core.formatting import split_message
from bot.chat.core.live import LiveReply
from bot.chat.core.progress import LiveOptions
from bot.chat.slack.directory import ThreadMemory
from bot.chat.slack.events import BotIdentity
from bot.chat.slack.live import SlackLiveOps, SlackMessages
from bot.chat.slack.mrkdwn import to_mrkdwn
from bot.chat.slack.web import error_of, web_api

log = logging.getLogger(__name__)

WORKING, DONE, FAILED = "eyes", "white_check_mark", "x"


@dataclass(frozen=True, slots=True)
class OutputLimits:
    message_chars: int = 3900
    file_threshold_chars: int = 12_000


class SlackPoster:
    def __init__(self, client: AsyncWebClient, limits: OutputLimits) -> None:
        self.client, self.limits = web_api(client), limits
        self.messages = SlackMessages(client)  # every text goes out through it
        self.can_stream: bool | None = None  # the workspace has chat.startStream (None: not tried yet)

    async def post(self, channel: str, markdown: str, thread_ts: str | None = None) -> list[str]:
        """Post Markdown as mrkdwn; returns the ts of every message posted (the first is the reference)."""
        if len(markdown) > self.limits.file_threshold_chars:
            return await self._post_as_file(channel, markdown, thread_ts)
        stamps: list[str] = []
        for chunk in split_message(to_mrkdwn(markdown) or " ", self.limits.message_chars):
            resp = await self._post_text(channel, chunk, thread_ts)
            stamps.append(str(resp["ts"]))
            channel = str(resp.get("channel") or channel)
        return stamps

    async def _post_text(self, channel: str, text: str, thread_ts: str | None) -> Any:
        return await self.messages.post(channel, text, thread_ts)

    async def _post_as_file(self, channel: str, markdown: str, thread_ts: str | None) -> list[str]:
        """A very long answer: its beginning as a message, all of it as `answer.md` in the same place."""
        head = split_message(to_mrkdwn(markdown), min(self.limits.message_chars, 2900))[0]
        note = f"{head}\n\n_(the answer is {len(markdown):,} characters long; the full text is in answer.md)_"
        resp = await self._post_text(channel, note, thread_ts)
        channel_id = str(resp.get("channel") or channel)
        await self.client.files_upload_v2(channel=channel_id, thread_ts=thread_ts, content=markdown.encode(),
                                          filename="answer.md", title="Full answer")
        return [str(resp["ts"])]

    # --- progress ------------------------------------------------------------------------------------
    async def react(self, channel: str, ts: str, name: str, remove: bool = False) -> None:
        """Best effort: a reaction that cannot be set must not fail the turn."""
        try:
            if remove:
                await self.client.reactions_remove(channel=channel, timestamp=ts, name=name)
            else:
                await self.client.reactions_add(channel=channel, timestamp=ts, name=name)
        except SlackApiError as exc:
            log.info("reaction %s on %s/%s: %s", name, channel, ts, error_of(exc))

    async def finish(self, channel: str, ts: str, ok: bool) -> None:
        await self.react(channel, ts, WORKING, remove=True)
        await self.react(channel, ts, DONE if ok else FAILED)


class SlackReply(LiveReply):
    """The reply surface for one Slack message: :eyes: while working, the answer in its thread (or inline in
    a DM), then :white_check_mark: or :x:. Remembers the thread, so follow-ups there need no mention.
    With `progress`, a status message and the answer as it is written (bot/chat/core/live.py over
    `SlackLiveOps`, bot/chat/slack/live.py)."""

    def __init__(self, poster: SlackPoster, channel: str, ts: str, thread: str, reply_thread: str | None,
                 threads: ThreadMemory, progress: LiveOptions | None = None, me: BotIdentity | None = None) -> None:
        self.slack_ops = SlackLiveOps(poster, channel, reply_thread)
        super().__init__(self.slack_ops, progress)
        self.poster, self.channel, self.ts, self.thread = poster, channel, ts, thread
        self.reply_thread, self.threads, self.me = reply_thread, threads, me

    async def working(self) -> str:
        await self.poster.react(self.channel, self.ts, WORKING)
        return self.thread

    async def deliver(self, text: str) -> None:
        await super().deliver(text)
        self.threads.remember(self.channel, self.thread)

    async def done(self, ok: bool) -> None:
        await self.poster.finish(self.channel, self.ts, ok)

    async def shows(self, answer: str) -> bool:
        """A message of the bot after this one, in the thread the answer goes to, that begins as `answer` posted
        would (mrkdwn; its first 200 characters, which a long answer's file note begins with too)."""
        if self.reply_thread is None or self.me is None:  # a DM's answer is inline; not looked for
            return False
        start = to_mrkdwn(answer).strip()[:200]
        return await self.threads.bot_posted(self.channel, self.reply_thread, after=self.ts, starting=start,
                                             user_id=self.me.user_id, bot_id=self.me.bot_id) if start else False
