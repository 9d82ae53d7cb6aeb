"""Posting to Discord over REST only, without the gateway: for processes that post but do not listen
(`yokebot schedule run`). It logs in (two REST calls) on the first post, so a run that posts nowhere on
Discord costs nothing. Channel names are looked up over REST too (the bot's guilds, their text channels)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import discord
from discord.abc import Messageable

from bot.chat.discord.adapter import redirect
from bot.chat.discord.output import NO_PINGS, post_to
from bot.config import Settings
from bot.engine.errors import ConfigError, ToolFailed

log = logging.getLogger(__name__)


class DiscordPoster:
    platform = "discord"

    def __init__(self, settings: Settings) -> None:
        if settings.discord_bot_token is None:
            raise ConfigError("DISCORD_BOT_TOKEN is not set, so nothing can be posted to Discord.")
        self.settings = settings
        self.client = discord.Client(intents=discord.Intents.none(), allowed_mentions=NO_PINGS)
        self._login_lock = asyncio.Lock()
        self._logged_in = False
        self._undo_redirect: Callable[[], None] | None = None
        self._by_name: dict[str, discord.TextChannel] | None = None

    async def start(self) -> None:
        return None  # logs in on the first post

    async def stop(self) -> None:
        if self._logged_in:
            await self.client.close()
        if self._undo_redirect is not None:
            self._undo_redirect()
            self._undo_redirect = None

    async def post(self, channel: str, text: str) -> str:
        """Post to `CHANNEL_ID` or `#name`; returns `discord:CHANNEL/MESSAGE` of the first message."""
        await self._login()
        dest = await self._channel(channel)
        return await post_to(dest, channel, text, attach_over=self.settings.discord_attach_over_chars)

    async def _login(self) -> None:
        async with self._login_lock:
            if self._logged_in:
                return
            if self._undo_redirect is None:
                self._undo_redirect = redirect(self.settings.discord_api_url, None)
            token = self.settings.discord_bot_token
            assert token is not None
            try:
                await self.client.login(token.get_secret_value())
            except discord.LoginFailure:
                raise ToolFailed("Discord rejected DISCORD_BOT_TOKEN (check the token in the Developer Portal, "
                                 "Bot tab)") from None
            except (discord.HTTPException, OSError) as exc:
                raise ToolFailed(f"cannot reach Discord to post: {type(exc).__name__}: {exc}") from None
            self._logged_in = True

    async def _channel(self, channel: str) -> Messageable:
        name = channel.strip().removeprefix("#")
        if name.isdigit():
            return self.client.get_partial_messageable(int(name))
        if self._by_name is None:
            self._by_name = await self._text_channels()
        found = self._by_name.get(name)
        if found is None:
            raise ToolFailed(
                f"cannot post to discord:{channel}: no text channel with that name is visible to the bot; "
                "use the channel ID (Developer Mode -> right click -> Copy Channel ID)"
            )
        return found

    async def _text_channels(self) -> dict[str, discord.TextChannel]:
        """name -> channel over the bot's guilds (the first guild, in Discord's order, wins a clash)."""
        found: dict[str, discord.TextChannel] = {}
        try:
            async for guild in self.client.fetch_guilds(limit=None):
                for ch in await guild.fetch_channels():
                    if isinstance(ch, discord.TextChannel):
                        found.setdefault(ch.name, ch)
        except discord.HTTPException as exc:
            raise ToolFailed(f"cannot list the bot's Discord channels: {exc.status} {exc.text}") from None
        return found
