"""Discord over REST: the one login (`DiscordLogin`, two REST calls, no gateway: used by the adapter before
it connects, and by `DiscordOutbox`), and posting without the gateway, for processes that post but do not
listen (`yokebot schedule run`). The poster logs in on the first post, so a run that posts nowhere on Discord
costs nothing; channel names are looked up over REST too (bot/chat/discord/directory.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import discord
import discord.gateway
import discord.http
import yarl
from discord.abc import Messageable

from bot.chat.core.platform import required
from bot.chat.discord.directory import channel_for_post, fetched_text_channels, into_thread
from bot.chat.discord.live import NO_PINGS
from bot.chat.discord.manifest import PLATFORM
from bot.chat.discord.output import post_to
from bot.config import Settings
from bot.engine.errors import ToolFailed
from bot.engine.messages import Scope

log = logging.getLogger(__name__)


def redirect(api_url: str | None, gateway_url: str | None) -> Callable[[], None]:
    """Point discord.py at another REST base / gateway. These are class attributes, so this is process-wide:
    one process talks to one Discord. Returns a function that undoes it."""
    route_cls, ws_cls = discord.http.Route, discord.gateway.DiscordWebSocket
    # interaction follow-ups (commands) go through the webhook module's own Route class
    hook_cls = discord.webhook.async_.Route  # pyright: ignore[reportPrivateImportUsage]
    old_base, old_hooks, old_gateway = route_cls.BASE, hook_cls.BASE, ws_cls.DEFAULT_GATEWAY
    if api_url:
        route_cls.BASE = hook_cls.BASE = api_url.rstrip("/")
    if gateway_url:
        ws_cls.DEFAULT_GATEWAY = yarl.URL(gateway_url)

    def undo() -> None:
        route_cls.BASE, hook_cls.BASE, ws_cls.DEFAULT_GATEWAY = old_base, old_hooks, old_gateway

    return undo


class DiscordLogin:
    """Log `client` in over REST once (DISCORD_API_URL, and the gateway URL for a client that connects later);
    `undo()` puts discord.py's URLs back. discord.py's errors pass through: each caller says them its way."""

    def __init__(self, client: discord.Client, settings: Settings, gateway_url: str | None = None) -> None:
        required(settings.discord_bot_token, "DISCORD_BOT_TOKEN is not set, so nothing can be done on Discord.")
        self.client, self.settings, self.gateway_url = client, settings, gateway_url
        self.logged_in = False
        self._undo_redirect: Callable[[], None] | None = None

    async def __call__(self) -> None:
        if self.logged_in:
            return
        if self._undo_redirect is None:
            self._undo_redirect = redirect(self.settings.discord_api_url, self.gateway_url)
        token = self.settings.discord_bot_token
        assert token is not None
        await self.client.login(token.get_secret_value())
        self.logged_in = True

    def undo(self) -> None:
        if self._undo_redirect is not None:
            self._undo_redirect()
            self._undo_redirect = None


class DiscordOutbox:
    """Posting to Discord by channel name or ID, without the gateway: the posting-only adapter."""

    platform = PLATFORM

    def __init__(self, settings: Settings) -> None:
        required(settings.discord_bot_token, "DISCORD_BOT_TOKEN is not set, so nothing can be posted to Discord.")
        self.settings = settings
        self.client = discord.Client(intents=discord.Intents.none(), allowed_mentions=NO_PINGS)
        self.login = DiscordLogin(self.client, settings)
        self._login_lock = asyncio.Lock()
        self._by_name: dict[str, Messageable] | None = None

    async def start(self) -> None:
        return None  # logs in on the first post

    async def stop(self) -> None:
        if self.login.logged_in:
            await self.client.close()
        self.login.undo()

    async def post(self, channel: str, text: str, within: Scope | None = None) -> str:
        """Post to `CHANNEL_ID` or `#name` (into `within`'s thread when it is that channel); returns
        `discord:CHANNEL/MESSAGE` of the first message."""
        await self._login()
        dest = into_thread(self.client, await channel_for_post(self.client, channel, self._text_channels), within)
        return await post_to(dest, channel, text, attach_over=self.settings.discord_attach_over_chars)

    async def _login(self) -> None:
        async with self._login_lock:
            try:
                await self.login()
            except discord.LoginFailure:
                raise ToolFailed("Discord rejected DISCORD_BOT_TOKEN (check the token in the Developer Portal, "
                                 "Bot tab)") from None
            except (discord.HTTPException, OSError) as exc:
                raise ToolFailed(f"cannot reach Discord to post: {type(exc).__name__}: {exc}") from None

    async def _text_channels(self) -> dict[str, Messageable]:
        if self._by_name is None:
            self._by_name = await fetched_text_channels(self.client)
        return self._by_name
