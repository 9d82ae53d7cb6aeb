"""Mattermost over its REST API v4 and WebSocket event stream (aiohttp): mentions in channels and threads, DMs,
and follow-ups in threads the bot is in. The adapter parses posts into `Inbound` and offers the reply surface
(`MattermostReply`); the inbound pipeline (bot/chat/core/pipeline.py) does the rest.

Sessions: a thread (its root post) is one session: a mention is answered in its thread (a mention at the top
of a channel starts one); a DM is one session (a thread in a DM: that thread).

The WebSocket reconnects with backoff (0.5 s doubling to `YOKEBOT_MATTERMOST_RECONNECT_MAX_SECONDS`); after
every (re)connection the bot reads the posts of its channels since the newest one it saw (at start: the last
minute) over REST, so nothing posted while it was away is missed. Each post taken is claimed in the durable inbox
by its ID before its turn starts: a post seen twice (event and catch-up, or by two instances) is answered once,
and after a crash recovery rebuilds it from the row (`rebuild`: IDs only, everything over REST)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

import aiohttp
from aiohttp import web

from bot.approvals.desk import ApprovalDesk
from bot.chat.core.access import AccessList, Origin, entries
from bot.chat.core.attachments import FileFetcher, refs_from, refs_json
from bot.chat.core.base import Directory, Inbound
from bot.chat.core.pipeline import Pipeline, PipelineLimits
from bot.chat.core.platform import PlatformParts
from bot.chat.core.progress import live_options
from bot.chat.core.threads import AlertThreads
from bot.chat.core.wiring import platform_commands, platform_pipeline
from bot.chat.mattermost.api import Json, MattermostError, fields
from bot.chat.mattermost.commands import MattermostCommands, style
from bot.chat.mattermost.events import Identity, Ignored, MattermostMessage, classify, event_mentions, event_post
from bot.chat.mattermost.manifest import FILE_HOSTS, PLATFORM, is_id
from bot.chat.mattermost.output import MattermostReply
from bot.chat.mattermost.rest import MattermostOutbox
from bot.engine.errors import ConfigError
from bot.engine.messages import Scope
from bot.records.inbox import InboxItem

log = logging.getLogger(__name__)

CLAIMS = PLATFORM  # the key is the post ID
ACTIONS_PATH = "/mattermost/actions"
FIRST_CATCH_UP_MS = 60_000  # at start, posts of the last minute are read too (claimed ones are not run twice)
BACKOFF_START = 0.5
HEARTBEAT_SECONDS = 30.0


def pipeline(parts: PlatformParts, directory: Directory) -> Pipeline:
    """Mattermost's settings for the one inbound pipeline (bot/chat/core/pipeline.py)."""
    settings = parts.settings
    lists = AccessList("YOKEBOT_MATTERMOST_ALLOWED_USERS / _TEAMS / _CHANNELS",
                       users=entries(settings.mattermost_allowed_users, PLATFORM),
                       groups=entries(settings.mattermost_allowed_teams, PLATFORM),
                       channels=entries(settings.mattermost_allowed_channels, PLATFORM))
    limits = PipelineLimits(settings.mattermost_max_concurrent_turns, settings.mattermost_drain_seconds)
    return platform_pipeline(PLATFORM, parts, lists, limits, namespace=CLAIMS, directory=directory, is_id=is_id)


class MattermostAdapter:
    platform = PLATFORM

    def __init__(self, parts: PlatformParts) -> None:
        settings = parts.settings
        self.settings = settings
        self.outbox = MattermostOutbox(settings)  # posting: answers, notify, scheduled reports, alert roots
        self.api, self.messages, self.directory = self.outbox.api, self.outbox.messages, self.outbox.directory
        self.files = FileFetcher(PLATFORM, (*FILE_HOSTS, self.api.url), self.api.token)  # attachments: the server only
        self.pipeline = pipeline(parts, self)
        # `/yokebot <sub>` (bot/chat/mattermost/commands.py): a custom slash command, claimed by its trigger_id
        token = settings.mattermost_command_token.get_secret_value() if settings.mattermost_command_token else None
        self.commands = MattermostCommands(platform_commands(self.pipeline, parts, style(self.api.url)),
                                           self.messages, token, self.api.url, self._me_id,
                                           lambda: live_options(settings))
        self.me: Identity | None = None
        self.desk: ApprovalDesk | None = None
        self.connected = False  # between a `hello` and the connection's end
        self.stopping = False
        self.ready = asyncio.Event()  # the first `hello`
        self.watermark: int | None = None  # create_at (ms, the server's clock) of the newest post seen
        self._runner: asyncio.Task[None] | None = None
        self._catching_up: asyncio.Task[None] | None = None  # the latest; each waits for the one before
        self._catch_ups: set[asyncio.Task[None]] = set()
        self._threads_in: set[str] = set()  # threads the bot is known to be in (follow-ups need no mention)

    # --- lifecycle ------------------------------------------------------------------------------------------
    async def identify(self) -> Identity:
        """Who the bot is (GET /users/me, once): enough to post, and to answer what recovery takes over."""
        if self.me is None:
            try:
                me = await self.api.me()
            except MattermostError as exc:
                if exc.status == 401:
                    raise ConfigError("Mattermost rejected MATTERMOST_BOT_TOKEN (401): create a token for the bot "
                                      "account and copy it into MATTERMOST_BOT_TOKEN.") from None
                raise ConfigError(f"Mattermost could not be asked who the bot is: {exc} (check MATTERMOST_URL)."
                                  ) from None
            self.me = Identity(str(me.get("id")), str(me.get("username")))
        return self.me

    async def _me_id(self) -> str:
        return (await self.identify()).user_id

    async def start(self, within: float = 30.0) -> None:
        """Connect the event stream; returns once the first connection said hello."""
        await self.identify()
        self._runner = asyncio.create_task(self._connection(), name="mattermost-websocket")
        try:
            async with asyncio.timeout(within):
                await self.ready.wait()
        except TimeoutError:
            raise ConfigError(f"Mattermost's WebSocket did not connect within {within:.0f} s (check MATTERMOST_URL "
                              "and that WebSocket connections reach the server).") from None
        log.info("Mattermost is on as @%s (%s)", self.me.username if self.me else "?", self.api.url)

    def is_connected(self) -> bool:
        """For /readyz: the WebSocket said hello and has not dropped since."""
        return self.connected and not self.stopping

    async def stop(self) -> None:
        """Stop taking posts, drain the turns in flight (REST stays up to post), then disconnect."""
        self.stopping = True
        self.pipeline.close()
        for task in (self._runner, *self._catch_ups):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self.connected = False
        await self.pipeline.drain()
        await self.outbox.stop()

    @property
    def busy(self) -> int:
        return self.pipeline.busy

    # --- the event stream -----------------------------------------------------------------------------------
    async def _connection(self) -> None:
        """Connect, read, and on any loss reconnect with backoff, for as long as the adapter runs."""
        delay = BACKOFF_START
        while not self.stopping:
            try:
                if await self._listen():
                    delay = BACKOFF_START  # it had said hello: a fresh start for the backoff
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
                log.warning("mattermost: WebSocket error: %s: %s", type(exc).__name__, exc)
            self.connected = False
            if self.stopping:
                return
            log.info("mattermost: WebSocket closed; reconnecting in %.1f s", delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.settings.mattermost_reconnect_max_seconds)

    async def _listen(self) -> bool:
        """One connection: authenticate, then hand every `posted` event on. True once it said hello."""
        url = self.api.url.replace("http", "ws", 1) + "/api/v4/websocket"
        hello = False
        async with self.api.session().ws_connect(url, headers=self.api.headers, heartbeat=HEARTBEAT_SECONDS) as ws:
            await ws.send_str(json.dumps({"seq": 1, "action": "authentication_challenge",
                                          "data": {"token": self.api.token}}))
            async for msg in ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    break
                event = fields(json.loads(str(msg.data)))
                kind = event.get("event")
                if kind == "hello":
                    hello = True
                    self._said_hello()
                elif kind == "posted":
                    await self._posted(fields(event.get("data")))
        return hello

    def _said_hello(self) -> None:
        self.connected = True
        self.ready.set()
        since = self.watermark if self.watermark is not None else int(time.time() * 1000) - FIRST_CATCH_UP_MS
        task = asyncio.create_task(self._catch_up(since, self._catching_up), name="mattermost-catch-up")
        self._catch_ups.add(task)
        task.add_done_callback(self._catch_ups.discard)
        self._catching_up = task

    async def _posted(self, data: Json) -> None:
        post = event_post(data)
        await self._received(post, str(data.get("channel_type") or ""), str(data.get("team_id") or ""),
                             event_mentions(data))

    async def _catch_up(self, since: int, before: asyncio.Task[None] | None = None) -> None:
        """The posts of the bot's channels created since `since` (REST): those the stream did not bring are taken
        now (one seen already is a duplicate claim). After the catch-up of an earlier connection, if it runs."""
        if before is not None and not before.done():
            await asyncio.wait({before})
        try:
            channels = await self.api.my_channels()
            for channel in channels:
                for post in await self.api.posts_since(str(channel.get("id")), since):
                    if int(post.get("create_at") or 0) >= since:
                        await self._received(post, str(channel.get("type") or ""), str(channel.get("team_id") or ""),
                                             [])
        except MattermostError as exc:
            log.warning("mattermost: could not catch up on posts since %s: %s", since, exc)

    async def _received(self, post: Json, channel_type: str, team: str, mentions: list[str]) -> None:
        me = await self.identify()
        created = int(post.get("create_at") or 0)
        self.watermark = max(self.watermark or 0, created)
        found = classify(post, channel_type, team, mentions, me, answer_bots=self.settings.mattermost_answer_bots,
                         api_url=self.api.url)
        if isinstance(found, Ignored):
            self.pipeline.ignored(found.reason, post.get("id"))
            return
        await self.pipeline.receive(self._inbound(found))

    # --- parse, rebuild ------------------------------------------------------------------------------------
    def _inbound(self, m: MattermostMessage) -> Inbound:
        me = self.me
        assert me is not None
        dm = m.trigger == "dm"
        reply = MattermostReply(self.messages, me.user_id, m.channel, m.post, m.thread, m.root,
                                live_options(self.settings))
        target: dict[str, Any] = {"post": m.post, "root": m.root, "team": m.team}
        if m.files:
            target["files"] = refs_json(m.files)

        async def addressed() -> bool:
            return await self._bot_in(m.thread)

        return Inbound(Origin(PLATFORM, m.channel, m.user, dm=dm, groups=frozenset({m.team} if m.team else ())),
                       m.thread, m.text, m.trigger, reply, message_id=m.post, claim_key=m.post,
                       groups_known=bool(m.team), addressed=addressed if m.trigger == "thread" else None,
                       target=target, files=self.files.sources(m.files))

    async def _bot_in(self, root: str) -> bool:
        """A follow-up in a thread is for the bot if the bot has posted in that thread."""
        if root not in self._threads_in:
            me = await self.identify()
            try:
                if any(p.get("user_id") == me.user_id for p in await self.api.thread(root)):
                    self._threads_in.add(root)
            except MattermostError as exc:
                log.warning("mattermost: cannot read thread %s: %s", root, exc)
        return root in self._threads_in

    def rebuild(self, item: InboxItem) -> Inbound:
        """The post of an inbox row taken over after a restart, as `_inbound` made it (recovery)."""
        t = item.reply
        if item.trigger == "command":
            assert self.me is not None  # recovery runs after `identify`
            return self.commands.rebuild(item, self.me.user_id)
        trigger = item.trigger if item.trigger in ("mention", "dm", "thread") else "mention"
        return self._inbound(MattermostMessage(str(t.get("post") or item.event_key), item.channel,
                                               str(t.get("team") or ""), item.user or "", item.text, trigger,
                                               item.thread, str(t.get("root") or ""), 0, refs_from(t)))

    # --- the registry's other hooks (bot/chat/core/platform.py) ---------------------------------------------
    def mount(self, http: web.Application) -> None:
        """Serve the approval buttons' clicks at /mattermost/actions and the slash command at
        /mattermost/commands (Mattermost posts them there)."""
        from bot.chat.mattermost.approvals import click_handler

        http.router.add_post(ACTIONS_PATH, click_handler(lambda: self.desk, self.api.token))
        self.commands.mount(http)  # /mattermost/commands, when YOKEBOT_MATTERMOST_COMMAND_TOKEN is set

    def mount_approvals(self, desk: ApprovalDesk) -> None:
        """Approve / Deny as interactive message buttons (bot/chat/mattermost/approvals.py)."""
        from bot.chat.mattermost.approvals import MattermostApprovalButtons

        self.desk = desk
        desk.register(PLATFORM, MattermostApprovalButtons(self.messages, self.settings.mattermost_actions_url,
                                                          self.api.token))

    def alert_threads(self) -> AlertThreads:
        """Alert roots, notes and edits (bot/chat/mattermost/alerts.py): through the outbox, as notify posts."""
        from bot.chat.mattermost.alerts import MattermostAlertThreads

        return MattermostAlertThreads(self.outbox)

    async def post(self, channel: str, text: str, within: Scope | None = None) -> str:
        """Post to `#name` or a channel ID (into `within`'s thread when it is that channel); returns
        `mattermost:CHANNEL/POST`."""
        return await self.outbox.post(channel, text, within)

    # --- what the pipeline may look up ----------------------------------------------------------------------
    async def channel_name(self, channel: str) -> str | None:
        return await self.directory.channel_name(channel)

    async def groups_of(self, user: str) -> frozenset[str]:
        return await self.directory.groups_of(user)

