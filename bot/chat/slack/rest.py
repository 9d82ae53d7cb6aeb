"""Posting to Slack by channel name or ID, without receiving anything: what `notify` and scheduled reports
use. SlackAdapter posts through one of these; a process that only posts (`yokebot schedule run`) registers one
on its own: no Socket Mode connection, no HTTP route, only the bot token and the Web API."""

from __future__ import annotations

from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.chat.core.platform import required
from bot.chat.slack.directory import ChannelDirectory
from bot.chat.slack.manifest import PLATFORM
from bot.chat.slack.output import OutputLimits, SlackPoster
from bot.chat.slack.web import error_of
from bot.config import Settings
from bot.engine.errors import ToolFailed
from bot.engine.messages import Scope

POST_HINTS = {
    "not_in_channel": " (invite the bot to the channel first: /invite @yokebot)",
    "channel_not_found": " (check the channel ID, and that the bot is a member)",
    "is_archived": " (the channel is archived)",
}


def web_client(settings: Settings, token: str | None) -> AsyncWebClient:
    """A Web API client on SLACK_API_URL that waits out 429s (Retry-After) and retries dropped connections."""
    retry: list[AsyncRetryHandler] = [
        AsyncRateLimitErrorRetryHandler(max_retry_count=settings.slack_rate_limit_retries),
        AsyncConnectionErrorRetryHandler(),
    ]
    return AsyncWebClient(token=token, base_url=settings.slack_api_url, retry_handlers=retry)


class SlackOutbox:
    """Posting to Slack by channel name or ID, without receiving: the posting-only adapter."""

    platform = PLATFORM

    def __init__(self, settings: Settings) -> None:
        self.web = web_client(settings, required(settings.slack_bot_token, "Slack needs SLACK_BOT_TOKEN."))
        self.poster = SlackPoster(self.web, OutputLimits(settings.slack_message_chars,
                                                         settings.slack_file_threshold_chars))
        self.directory = ChannelDirectory(self.web)

    async def start(self) -> None:
        """One aiohttp session for every Web API call (`also`: other clients to share it, Bolt's): slack_sdk
        otherwise opens a session and a TCP connection per call, which in a burst of 200 mentions was a
        third of the event loop's time."""
        await self.share_session()

    async def share_session(self, *also: AsyncWebClient) -> None:
        import aiohttp

        if self.web.session is None or self.web.session.closed:
            self.web.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.web.timeout))
        for client in also:
            client.session = self.web.session

    async def stop(self) -> None:
        session, self.web.session = self.web.session, None
        if session is not None:
            await session.close()

    async def post(self, channel: str, text: str, within: Scope | None = None) -> str:
        """Post to `#name` (resolved with conversations.list) or a channel ID; returns `slack:<id>:<ts>`. Into
        the thread of `within` when that is the channel (a reply there, not a new top-level message)."""
        channel_id = channel
        try:
            if channel.startswith("#"):
                found = await self.directory.id_for(channel)
                if found is None:
                    raise ToolFailed(f"there is no Slack channel {channel} that the bot can see "
                                     "(check the name; for a private channel, invite the bot)")
                channel_id = found
            thread_ts = within.thread if within is not None and within.channel == channel_id else None
            stamps = await self.poster.post(channel_id, text, thread_ts)
        except SlackApiError as exc:
            error = error_of(exc)
            hint = POST_HINTS.get(error, "")
            raise ToolFailed(f"Slack refused the post to {channel}: {error}{hint}") from None
        return f"{PLATFORM}:{channel_id}:{stamps[0]}"
