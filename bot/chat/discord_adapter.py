"""Discord on the gateway (discord.py): mentions in guild channels, DMs, and follow-ups in the bot's threads
become turns of AgentService. The adapter translates and delivers; it holds no agent logic.

Sessions: a DM channel is one session; in a guild the bot answers a mention in a thread it creates on the
triggering message, and that thread is one session (with `YOKEBOT_DISCORD_REPLY_INLINE` it answers in the
channel, and the channel is one session)."""

from __future__ import annotations

import asyncio
import copy
import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import discord
import discord.gateway
import discord.http
import yarl
from discord.abc import Messageable

from bot.chat.base import EventClaims, EventCounter, InboundMessage, OutboundMessage
from bot.chat.discord_output import NO_PINGS, deliver, post_to, react, typing
from bot.chat.discord_routing import Origin, comma_list, permitted, profile_permits, route
from bot.config import Settings
from bot.engine.errors import ConfigError, ToolFailed, YokebotError
from bot.engine.profiles import AgentProfile
from bot.engine.service import AgentService

log = logging.getLogger(__name__)

DONE, FAILED = "✅", "❌"
REFUSAL = "Sorry, you are not allowed to ask me here. Ask an admin to add you to this agent's access list."
EMPTY = "Hi! Mention me with a question, for example: @yokebot check the nginx error log."
CRASH = "Sorry, something went wrong on my side and I could not answer; the details are in the bot's logs."
ANSWERED_TYPES = (discord.MessageType.default, discord.MessageType.reply)
SEEN_MAX = 2048


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
    return discord.utils.oauth_url(application_id, permissions=PERMISSIONS, scopes=["bot"])


def intents() -> discord.Intents:
    """Guilds (channel and thread cache), guild messages, DMs, and message content (privileged)."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.guild_messages = True
    wanted.dm_messages = True
    wanted.message_content = True
    return wanted


def redirect(api_url: str | None, gateway_url: str | None) -> Callable[[], None]:
    """Point discord.py at another REST base / gateway. These are class attributes, so this is process-wide:
    one process talks to one Discord. Returns a function that undoes it."""
    route_cls, ws_cls = discord.http.Route, discord.gateway.DiscordWebSocket
    old_base, old_gateway = route_cls.BASE, ws_cls.DEFAULT_GATEWAY
    if api_url:
        route_cls.BASE = api_url.rstrip("/")
    if gateway_url:
        ws_cls.DEFAULT_GATEWAY = yarl.URL(gateway_url)

    def undo() -> None:
        route_cls.BASE, ws_cls.DEFAULT_GATEWAY = old_base, old_gateway

    return undo


@dataclass(frozen=True, slots=True)
class Trigger:
    kind: str  # dm | mention | thread
    origin: Origin
    text: str


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
        self.adapter.received(message)

    # no on_message_edit: edits are ignored on purpose


class DiscordAdapter:
    platform = "discord"

    def __init__(
        self,
        service: AgentService,
        settings: Settings,
        profiles: Mapping[str, AgentProfile],
        *,
        claims: EventClaims | None = None,
        metrics: EventCounter | None = None,
    ) -> None:
        if settings.discord_bot_token is None:
            raise ConfigError("DISCORD_BOT_TOKEN is not set, so Discord cannot start.")
        self.service, self.settings, self.profiles = service, settings, profiles
        self.claims, self.metrics = claims, metrics  # claims: the database, so instances answer a message once
        self.connected = False  # between READY/RESUMED and a disconnect
        self.client = _Client(
            self,
            intents=intents(),
            allowed_mentions=NO_PINGS,
            guild_ready_timeout=settings.discord_guild_ready_timeout,
        )
        self.ready = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()
        self.stopping = False
        self._runner: asyncio.Task[None] | None = None
        self._undo_redirect: Callable[[], None] | None = None
        self._seen: OrderedDict[int, None] = OrderedDict()
        self._allow = (
            comma_list(settings.discord_allowed_users),
            comma_list(settings.discord_allowed_roles),
            comma_list(settings.discord_allowed_channels),
        )

    # --- lifecycle ------------------------------------------------------------------------------------------
    async def start(self, within: float = 60.0) -> None:
        """Log in and connect; returns once the gateway is READY. A bad token or a missing intent is one
        clear ConfigError."""
        self._undo_redirect = redirect(self.settings.discord_api_url, self.settings.discord_gateway_url)
        token = self.settings.discord_bot_token
        assert token is not None
        self._runner = asyncio.create_task(
            self.client.start(token.get_secret_value()), name="discord-gateway"
        )
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

    def _count(self, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.adapter_event(self.platform, kind)

    def _gateway_ended(self, task: asyncio.Task[None]) -> None:
        self.connected = False
        if self.stopping or task.cancelled():
            return
        error = task.exception()
        if error is not None:  # discord.py gave up (not a reconnect): the bot is deaf until restarted
            log.error("discord: the gateway connection ended and will not reconnect", exc_info=error)

    async def stop(self) -> None:
        """Stop taking messages, let the turns in flight finish (up to the drain time), then disconnect."""
        self.stopping = True
        if self.tasks:
            log.info("discord: waiting for %d turn(s) in flight", len(self.tasks))
            _, pending = await asyncio.wait(set(self.tasks), timeout=self.settings.discord_drain_seconds)
            for task in pending:
                log.warning(
                    "discord: a turn did not finish within %.0f s and is cancelled",
                    self.settings.discord_drain_seconds,
                )
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
        await self._close_client()

    async def _close_client(self) -> None:
        await self.client.close()
        if self._runner is not None:
            await asyncio.gather(self._runner, return_exceptions=True)
        if self._undo_redirect is not None:
            self._undo_redirect()
            self._undo_redirect = None

    # --- outbound (notify, schedules) -----------------------------------------------------------------------
    async def post(self, channel: str, text: str) -> str:
        """Post to `CHANNEL_ID` or `#name`; returns `discord:CHANNEL/MESSAGE` of the first message."""
        dest = self._channel_for_post(channel)
        return await post_to(dest, channel, text, attach_over=self.settings.discord_attach_over_chars)

    async def send(self, message: OutboundMessage) -> str:
        target = message.thread if message.thread and message.thread != message.channel else message.channel
        return await self.post(target, message.text)

    def _channel_for_post(self, channel: str) -> Messageable:
        if not self.ready.is_set():
            raise ToolFailed("cannot post to Discord: the bot is not connected to the gateway yet")
        name = channel.strip().removeprefix("#")
        if name.isdigit():
            found = self.client.get_channel(int(name))
            return found if isinstance(found, Messageable) else self.client.get_partial_messageable(int(name))
        for guild in self.client.guilds:
            for text_channel in guild.text_channels:
                if text_channel.name == name:
                    return text_channel
        raise ToolFailed(
            f"cannot post to discord:{channel}: no text channel with that name is visible to the bot; "
            "use the channel ID (Developer Mode -> right click -> Copy Channel ID)"
        )

    # --- inbound --------------------------------------------------------------------------------------------
    def received(self, message: discord.Message) -> None:
        """Called on the gateway task: hand the message to a tracked background task and return at once."""
        if self.stopping:
            log.info("discord: stopping, message %s is not taken", message.id)
            return
        # a copy: discord.py updates cached Messages in place when an edit arrives (edits are ignored)
        task = asyncio.create_task(self._handle(copy.copy(message)), name=f"discord-message-{message.id}")
        self.tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("discord: handling a message failed", exc_info=task.exception())

    async def _first_time(self, message_id: int) -> bool:
        """Answer a message once: a resumed gateway may replay it (caught in memory), and every instance running
        with the same token gets it (caught by the `processed_events` row the first one writes)."""
        if message_id in self._seen:
            return False
        self._seen[message_id] = None
        while len(self._seen) > SEEN_MAX:
            self._seen.popitem(last=False)
        return self.claims is None or await self.claims.claim_event(self.platform, str(message_id))

    async def _handle(self, message: discord.Message) -> None:
        channel = await self._resolve_channel(message)
        trigger = self.classify(message, channel)
        if trigger is None:
            self._count("ignored")
            return
        if not await self._first_time(message.id):
            self._count("duplicate")
            return
        self._count(trigger.kind)
        agent = route(self.profiles, trigger.origin, self.settings.default_agent)
        if trigger.origin.dm and self._roles_matter(agent):
            trigger = replace(
                trigger, origin=replace(trigger.origin, roles=await self._guild_roles(message.author.id))
            )
        if not self._permits(agent, trigger.origin):
            log.info(
                "discord: refused user %s in channel %s (agent %s)",
                trigger.origin.user,
                trigger.origin.channel,
                agent,
            )
            self._count("refused")
            await deliver(channel, REFUSAL, attach_over=10_000, reference=message)
            return
        if not trigger.text:
            await deliver(channel, EMPTY, attach_over=10_000, reference=message)
            return
        dest, thread, reference = await self._destination(message, channel, trigger)
        inbound = InboundMessage(
            platform="discord",
            channel=trigger.origin.channel,
            thread=thread,
            text=trigger.text,
            user=trigger.origin.user,
            trigger=trigger.kind,
            message_id=str(message.id),
        )
        ok = await self._turn(inbound, agent, dest, reference)
        await react(message, DONE if ok else FAILED)

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

    def classify(self, message: discord.Message, channel: Messageable) -> Trigger | None:
        """Which trigger this message is, or None when the bot should stay silent."""
        me = self.client.user
        if me is None or message.author.id == me.id or message.type not in ANSWERED_TYPES:
            return None
        if message.edited_at is not None:  # an edit reached the cached message before we read it
            return None
        if message.author.bot and not self.settings.discord_answer_bots:
            return None
        mentioned = any(u.id == me.id for u in message.mentions)
        text = re.sub(rf"<@!?{me.id}>", "", message.content).strip()
        if message.guild is None:
            return Trigger("dm", Origin(str(channel.id), None, str(message.author.id), dm=True), text)  # type: ignore[attr-defined]
        roles = _roles(message.author)
        if isinstance(channel, discord.Thread):
            if channel.owner_id != me.id and not mentioned:
                return None
            parent = channel.parent
            origin = Origin(
                str(channel.parent_id), parent.name if parent else None, str(message.author.id), roles
            )
            return Trigger("thread", origin, text)
        if not mentioned:
            return None
        name = getattr(channel, "name", None)
        return Trigger("mention", Origin(str(channel.id), name, str(message.author.id), roles), text)  # type: ignore[attr-defined]

    def _permits(self, agent: str, origin: Origin) -> bool:
        if not permitted(*self._allow, origin):
            return False
        profile = self.profiles.get(agent)
        return profile is None or profile_permits(profile.access, origin)

    def _roles_matter(self, agent: str) -> bool:
        profile = self.profiles.get(agent)
        return bool(self._allow[1]) or (profile is not None and bool(profile.access.roles))

    async def _guild_roles(self, user_id: int) -> frozenset[str]:
        """A DM carries no roles: look the author up in the bot's guilds (REST; no members intent needed)."""
        found: set[str] = set()
        for guild in self.client.guilds:
            try:
                member = await guild.fetch_member(user_id)
            except discord.HTTPException:
                continue
            found |= _roles(member)
        return frozenset(found)

    async def _destination(
        self, message: discord.Message, channel: Messageable, trigger: Trigger
    ) -> tuple[Messageable, str, discord.Message | None]:
        """Where the answer goes, the session's thread key, and the message to reply to (if any)."""
        if trigger.kind == "dm":
            return channel, trigger.origin.channel, None
        if trigger.kind == "thread":
            return channel, str(channel.id), None  # type: ignore[attr-defined]
        if self.settings.discord_reply_inline:
            return channel, trigger.origin.channel, message
        try:
            thread = await message.create_thread(name=_thread_name(trigger.text), auto_archive_duration=1440)
        except discord.HTTPException as exc:
            log.warning(
                "discord: cannot create a thread in %s (%s); answering inline", trigger.origin.channel, exc
            )
            return channel, str(message.id), message
        return thread, str(thread.id), None

    async def _turn(
        self, inbound: InboundMessage, agent: str, dest: Messageable, reference: discord.Message | None
    ) -> bool:
        ok = False
        async with typing(dest):
            try:
                result = await self.service.handle(inbound.to_request(agent))
                answer, ok = result.answer, result.error is None
            except YokebotError as exc:
                answer = f"Sorry, I could not do this: {exc}"
            except Exception:
                log.exception("discord: turn for message %s failed", inbound.message_id)
                answer = CRASH
                self._count("error")
        try:
            await deliver(
                dest, answer, attach_over=self.settings.discord_attach_over_chars, reference=reference
            )
        except discord.HTTPException as exc:
            log.error("discord: could not deliver the answer to message %s: %s", inbound.message_id, exc)
            return False
        return ok


def _roles(author: discord.User | discord.Member) -> frozenset[str]:
    if not isinstance(author, discord.Member):
        return frozenset()
    return frozenset(
        {str(r.id) for r in author.roles} | {r.name for r in author.roles} | {str(r) for r in author._roles}
    )


def _thread_name(text: str) -> str:
    first = " ".join(text.split())
    return (first[:90] + "…") if len(first) > 90 else (first or "yokebot")


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
