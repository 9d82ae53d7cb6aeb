"""Discord on the gateway (discord.py): mentions in guild channels, DMs, and follow-ups in the bot's threads.
The adapter parses messages into `Inbound` and offers the reply surface (`DiscordReply`); the inbound
pipeline (bot/chat/core/pipeline.py) does the rest.

Sessions: a DM channel is one session; in a guild the bot answers a mention in a thread it creates on the
triggering message, and that thread is one session (with `YOKEBOT_DISCORD_REPLY_INLINE` it answers in the
channel, and the channel is one session).

With the durable inbox (`inbox`, as `yokebot run` wires it) each message taken is stored with its claim; after
a crash, recovery rebuilds it from the row (`rebuild`: IDs only, replies over REST) and answers it."""

from __future__ import annotations

import asyncio
import copy
import logging
import re
from functools import partial
from typing import Any

import discord
from aiohttp import web
from discord.abc import Messageable

from bot.approvals.desk import ApprovalDesk
from bot.chat.core.access import AccessList, Origin, entries
from bot.chat.core.attachments import FileFetcher, FileRef, refs_from, refs_json
from bot.chat.core.base import Directory, Inbound, Trigger
from bot.chat.core.pipeline import Pipeline, PipelineLimits
from bot.chat.core.platform import PlatformParts, required
from bot.chat.core.progress import live_options
from bot.chat.core.threads import AlertThreads
from bot.chat.core.wiring import platform_commands, platform_pipeline
from bot.chat.discord.commands import DiscordCommands, style
from bot.chat.discord.directory import (
    cached_text_channels,
    channel_for_post,
    channel_name,
    groups_of,
    into_thread,
    roles,
)
from bot.chat.discord.live import NO_PINGS
from bot.chat.discord.manifest import FILE_HOSTS, PLATFORM, is_id
from bot.chat.discord.output import DiscordReply, post_to, stored_message
from bot.chat.discord.rest import DiscordLogin
from bot.engine.errors import ConfigError, ToolFailed
from bot.engine.messages import Scope
from bot.records.inbox import InboxItem

log = logging.getLogger(__name__)

CLAIMS = PLATFORM  # the key is the message ID


def pipeline(parts: PlatformParts, directory: Directory) -> Pipeline:
    """Discord's settings for the one inbound pipeline (bot/chat/core/pipeline.py)."""
    settings = parts.settings
    lists = AccessList("YOKEBOT_DISCORD_ALLOWED_USERS / _ROLES / _CHANNELS",
                       users=entries(settings.discord_allowed_users, PLATFORM),
                       groups=entries(settings.discord_allowed_roles, PLATFORM),
                       channels=entries(settings.discord_allowed_channels, PLATFORM))
    limits = PipelineLimits(settings.discord_max_concurrent_turns, settings.discord_drain_seconds)
    return platform_pipeline(PLATFORM, parts, lists, limits, namespace=CLAIMS, directory=directory, is_id=is_id)


ANSWERED_TYPES = (discord.MessageType.default, discord.MessageType.reply)
CHANNEL_TYPES = {"dm": discord.ChannelType.private, "thread": discord.ChannelType.public_thread,
                 "mention": discord.ChannelType.text}  # where a message of each trigger was written (rebuild)


# what the bot needs in a channel: see it, read history, answer, open and write in threads, react, attach
PERMISSIONS = discord.Permissions(
    view_channel=True,
    read_message_history=True,
    send_messages=True,
    create_public_threads=True,
    send_messages_in_threads=True,
    add_reactions=True,
    attach_files=True,
)


def invite_url(application_id: int) -> str:
    return discord.utils.oauth_url(application_id, permissions=PERMISSIONS, scopes=["bot", "applications.commands"])


def intents() -> discord.Intents:
    """Guilds (channel and thread cache), guild messages, DMs, and message content (privileged)."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.guild_messages = True
    wanted.dm_messages = True
    wanted.message_content = True
    return wanted


class _Client(discord.Client):
    def __init__(self, adapter: DiscordAdapter, **options: Any) -> None:
        super().__init__(**options)
        self.adapter = adapter

    async def on_ready(self) -> None:
        log.info("discord: connected as %s (%s guilds)", self.user, len(self.guilds))
        if self.application_id is not None:
            log.info("discord: invite the bot with %s", invite_url(self.application_id))
        self.adapter.connected = True
        self.adapter.ready.set()

    async def on_resumed(self) -> None:
        log.info("discord: gateway session resumed")
        self.adapter.connected = True

    async def on_disconnect(self) -> None:
        self.adapter.connected = False  # discord.py reconnects by itself; READY or RESUMED sets it back

    async def on_message(self, message: discord.Message) -> None:
        # a copy: discord.py updates cached Messages in place when an edit arrives (edits are ignored)
        await self.adapter.received(copy.copy(message))

    # no on_message_edit: edits are ignored on purpose


class DiscordAdapter:
    platform = PLATFORM

    def __init__(self, parts: PlatformParts) -> None:
        settings = parts.settings
        required(settings.discord_bot_token, "DISCORD_BOT_TOKEN is not set, so Discord cannot start.")
        self.settings = settings
        self.files = FileFetcher(PLATFORM, (*FILE_HOSTS, settings.discord_api_url))  # attachments, from its CDN
        # inbox: the durable inbox's exactly-once step (bot/chat/core/inbox_turns.py); without it, `claims`
        # (processed_events), so instances sharing the database answer a message once, but a crash loses it
        self.pipeline = pipeline(parts, self)
        self.connected = False  # between READY/RESUMED and a disconnect
        self.client = _Client(
            self,
            intents=intents(),
            allowed_mentions=NO_PINGS,
            guild_ready_timeout=settings.discord_guild_ready_timeout,
        )
        # `/yokebot <sub>` (bot/chat/discord/commands.py): synced at start, claimed by the interaction's ID
        self.commands = DiscordCommands(self.client, platform_commands(self.pipeline, parts, style(self.client)),
                                        guilds=settings.discord_command_guilds, inline=settings.discord_reply_inline,
                                        attach_over=settings.discord_attach_over_chars,
                                        progress=lambda: live_options(settings))
        self.ready = asyncio.Event()
        self.stopping = False
        self._runner: asyncio.Task[None] | None = None
        self.login = DiscordLogin(self.client, settings, settings.discord_gateway_url)

    # --- lifecycle ------------------------------------------------------------------------------------------
    async def identify(self) -> None:
        """Log in over REST (two calls, no gateway): enough to post, so recovery can answer the messages of a
        dead instance before the gateway is up. A bad token is one clear ConfigError."""
        try:
            await self.login()
        except Exception as exc:
            log.error("discord: login failed", exc_info=exc)
            await self._close_client()
            raise ConfigError(_start_failure(exc, 0)) from None

    async def start(self, within: float = 60.0) -> None:
        """Log in (unless `identify` did) and connect; returns once the gateway is READY. A bad token or a
        missing intent is one clear ConfigError."""
        await self.identify()
        await self.commands.sync()
        self._runner = asyncio.create_task(self.client.connect(), name="discord-gateway")
        self._runner.add_done_callback(self._gateway_ended)
        ready = asyncio.create_task(self.ready.wait())
        done, _ = await asyncio.wait(
            {self._runner, ready}, timeout=within, return_when=asyncio.FIRST_COMPLETED
        )
        if ready not in done:
            ready.cancel()
            error = self._runner.exception() if self._runner in done else None
            if error is not None:
                log.error("discord: start failed", exc_info=error)
            await self._close_client()
            raise ConfigError(_start_failure(error, within)) from None

    def is_connected(self) -> bool:
        """For /readyz: the gateway session is READY (or RESUMED) and has not dropped since."""
        return self.connected and not self.stopping and not self.client.is_closed()

    def _gateway_ended(self, task: asyncio.Task[None]) -> None:
        self.connected = False
        if self.stopping or task.cancelled():
            return
        error = task.exception()
        if error is not None:  # discord.py gave up (not a reconnect): the bot is deaf until restarted
            log.error("discord: the gateway connection ended and will not reconnect", exc_info=error)

    async def stop(self) -> None:
        """Stop taking messages, drain the turns in flight (the gateway stays up to post), then disconnect."""
        self.stopping = True
        await self.pipeline.drain()
        await self._close_client()

    @property
    def busy(self) -> int:
        return self.pipeline.busy

    async def _close_client(self) -> None:
        await self.client.close()
        if self._runner is not None:
            await asyncio.gather(self._runner, return_exceptions=True)
        self.login.undo()

    # --- outbound (notify, schedules) -----------------------------------------------------------------------
    async def post(self, channel: str, text: str, within: Scope | None = None) -> str:
        """Post to `CHANNEL_ID` or `#name` (into `within`'s thread when it is that channel); returns
        `discord:CHANNEL/MESSAGE` of the first message."""
        if not self.ready.is_set():
            raise ToolFailed("cannot post to Discord: the bot is not connected to the gateway yet")
        dest = into_thread(self.client, await channel_for_post(self.client, channel,
                                                               partial(cached_text_channels, self.client)), within)
        return await post_to(dest, channel, text, attach_over=self.settings.discord_attach_over_chars)

    # --- the registry's other hooks (bot/chat/core/platform.py) ---------------------------------------------
    def mount(self, http: web.Application) -> None:
        """Discord talks over its gateway: no HTTP route."""
        return None

    def mount_approvals(self, desk: ApprovalDesk) -> None:
        """Approve / Deny buttons and their clicks (INTERACTION_CREATE on the gateway)."""
        from bot.chat.discord.approvals import mount_approvals

        mount_approvals(self.client, desk)

    def alert_threads(self) -> AlertThreads:
        """Alert roots, notes and edits (bot/chat/discord/alerts.py): posted like notify's posts."""
        from bot.chat.discord.alerts import DiscordAlertThreads

        return DiscordAlertThreads(self, self.client, self.settings.discord_attach_over_chars)

    # --- inbound: parse, hand to the pipeline ---------------------------------------------------------------
    async def received(self, message: discord.Message) -> None:
        """Called by discord.py in a task of its own for every MESSAGE_CREATE."""
        channel = await self._resolve_channel(message)
        inbound = self.parse(message, channel)
        if inbound is None:
            self.pipeline.ignored("not addressed to the bot", message.id)
            return
        await self.pipeline.receive(inbound)

    async def _resolve_channel(self, message: discord.Message) -> Messageable:
        channel = message.channel
        if isinstance(channel, discord.PartialMessageable) and channel.guild_id is not None:
            try:  # a thread the cache has not seen (created before a restart, say)
                fetched = await self.client.fetch_channel(channel.id)
                if isinstance(fetched, Messageable):
                    return fetched
            except discord.HTTPException as exc:
                log.warning("discord: cannot look up channel %s: %s", channel.id, exc)
        return channel

    def parse(self, message: discord.Message, channel: Messageable) -> Inbound | None:
        """The message as an `Inbound`, or None when the bot should stay silent."""
        me = self.client.user
        if me is None or message.author.id == me.id or message.type not in ANSWERED_TYPES:
            return None
        if message.edited_at is not None:  # an edit reached the cached message before we read it
            return None
        if message.author.bot and not self.settings.discord_answer_bots:
            return None
        mentioned = any(u.id == me.id for u in message.mentions)
        text = re.sub(rf"<@!?{me.id}>", "", message.content).strip()
        author, channel_id = str(message.author.id), str(getattr(channel, "id", message.channel.id))
        if message.guild is None:
            return self._inbound(message, channel, Origin(self.platform, channel_id, author, dm=True), "dm", text,
                                 channel_id)
        origin = Origin(self.platform, channel_id, author, groups=roles(message.author))
        if isinstance(channel, discord.Thread):
            if channel.owner_id != me.id and not mentioned:
                return None
            return self._inbound(message, channel, Origin(self.platform, str(channel.parent_id), author,
                                                          groups=origin.groups), "thread", text, channel_id)
        if not mentioned:
            return None
        return self._inbound(message, channel, origin, "mention", text, channel_id)

    def _inbound(self, message: discord.Message, channel: Messageable, origin: Origin, trigger: Trigger,
                 text: str, thread: str) -> Inbound:
        reply = self._reply(message, channel, thread, text, trigger)
        where = getattr(channel, "id", message.channel.id)
        # what `rebuild` needs to answer it after a restart: IDs only (roles: the access check sees them again)
        target = {"message": str(message.id), "channel": str(where),
                  "guild": str(message.guild.id) if message.guild is not None else None,
                  "roles": sorted(origin.groups)}
        files = tuple(FileRef(self.platform, a.filename, a.url, a.content_type or "", a.size)
                      for a in message.attachments)
        target |= {"files": refs_json(files)} if files else {}
        return Inbound(origin, thread, text, trigger, reply, message_id=str(message.id),
                       claim_key=str(message.id), groups_known=not origin.dm, target=target,
                       files=self.files.sources(files))

    def _reply(self, message: discord.Message | discord.PartialMessage, channel: Messageable, thread: str,
               text: str, trigger: Trigger, rest: discord.Client | None = None) -> DiscordReply:
        return DiscordReply(message, channel, thread, text, opens_thread=trigger == "mention",
                            inline=self.settings.discord_reply_inline,
                            attach_over=self.settings.discord_attach_over_chars,
                            progress=live_options(self.settings), rest=rest)

    def rebuild(self, item: InboxItem) -> Inbound:
        """The message of an inbox row taken over after a restart, as `_inbound` made it, with a reply surface
        that works over REST from the stored IDs (recovery; the gateway need not be up)."""
        t = item.reply
        if item.trigger == "command":
            return self.commands.rebuild(Origin(self.platform, item.channel, item.user), item.event_key)
        trigger: Trigger = item.trigger if item.trigger in CHANNEL_TYPES else "mention"
        guild = int(t["guild"]) if t.get("guild") else None
        message, channel = stored_message(self.client, int(t["channel"]), int(t["message"]), guild,
                                          CHANNEL_TYPES[trigger])
        dm = trigger == "dm"
        origin = Origin(self.platform, item.channel, item.user, dm=dm, groups=frozenset(t.get("roles") or ()))
        reply = self._reply(message, channel, item.thread, item.text, trigger, rest=self.client)
        return Inbound(origin, item.thread, item.text, trigger, reply, message_id=str(message.id),
                       claim_key=item.event_key, groups_known=not dm, target=t,
                       files=self.files.sources(refs_from(t)))

    # --- what the pipeline may look up (bot/chat/discord/directory.py) --------------------------------------
    async def channel_name(self, channel: str) -> str | None:
        """From the gateway's cache; over REST when it does not have the channel (yet: a message answered
        by recovery before the gateway is up)."""
        return await channel_name(self.client, channel)

    async def groups_of(self, user: str) -> frozenset[str]:
        return await groups_of(self.client, user)


def _start_failure(error: BaseException | None, timeout: float) -> str:
    if isinstance(error, discord.LoginFailure):
        return "Discord rejected DISCORD_BOT_TOKEN (check the token in the Developer Portal, Bot tab)."
    if isinstance(error, discord.PrivilegedIntentsRequired):
        return (
            "Discord refused the Message Content intent: enable it in the Developer Portal "
            "(Bot tab -> Privileged Gateway Intents -> Message Content Intent)."
        )
    if error is not None:
        return f"Discord could not connect: {type(error).__name__}: {error}"
    return f"Discord did not become ready within {timeout:.0f} s (check DISCORD_GATEWAY_URL and the network)."
