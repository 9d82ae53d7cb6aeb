"""Posting to Mattermost without listening (no WebSocket): what `notify`, scheduled reports and alert roots use.
The adapter posts through one of these; a process that only posts (`yokebot schedule run`) registers one on its
own."""

from __future__ import annotations

from bot.chat.core.platform import required
from bot.chat.mattermost.api import MattermostApi, MattermostError
from bot.chat.mattermost.directory import MattermostDirectory
from bot.chat.mattermost.live import MattermostMessages
from bot.chat.mattermost.manifest import PLATFORM
from bot.config import Settings
from bot.engine.errors import ConfigError, ToolFailed
from bot.engine.messages import Scope


def api_of(settings: Settings) -> MattermostApi:
    token = required(settings.mattermost_bot_token, "MATTERMOST_BOT_TOKEN is not set, so Mattermost cannot start.")
    if not settings.mattermost_url:
        raise ConfigError("MATTERMOST_BOT_TOKEN is set but MATTERMOST_URL is not: set it to the server's address, "
                          "like https://chat.example.com.")
    return MattermostApi(settings.mattermost_url, token)


class MattermostOutbox:
    """Posting by channel name or ID: the posting-only adapter."""

    platform = PLATFORM

    def __init__(self, settings: Settings) -> None:
        self.api = api_of(settings)
        self.messages = MattermostMessages(self.api, settings.mattermost_attach_over_chars)
        self.directory = MattermostDirectory(self.api)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        await self.api.close()

    async def post(self, channel: str, text: str, within: Scope | None = None) -> str:
        """Post to `#name` or a channel ID (into `within`'s thread when it is that channel); returns
        `mattermost:CHANNEL/POST` of the first post."""
        channel_id = await self.directory.channel_id(channel)
        root = within.thread if within is not None and within.channel == channel_id else ""
        try:
            posted = await self.messages.deliver(channel_id, text, root)
        except MattermostError as exc:
            hint = " (add the bot to the channel)" if exc.status == 403 else ""
            raise ToolFailed(f"Mattermost refused the post to {channel}: {exc}{hint}") from None
        return f"{PLATFORM}:{channel_id}/{posted[0]}"
