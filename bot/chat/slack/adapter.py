"""Slack through Bolt (async): mentions, DMs and thread follow-ups, in Socket Mode or HTTP Events mode.

This adapter parses Bolt's events into `Inbound` and offers the reply surface (`SlackReply`); the inbound
pipeline (bot/chat/core/pipeline.py) claims each message before Bolt acks it and runs the turn in the background."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError

from bot.approvals.desk import ApprovalDesk
from bot.chat.core.access import AccessList, Origin, entries
from bot.chat.core.attachments import FileFetcher, refs_from, refs_json
from bot.chat.core.base import Directory, Inbound
from bot.chat.core.pipeline import Pipeline, PipelineLimits, Receipt
from bot.chat.core.platform import PlatformParts, required
from bot.chat.core.progress import live_options
from bot.chat.core.threads import AlertThreads
from bot.chat.core.wiring import platform_commands, platform_pipeline
from bot.chat.slack.assistant import build_assistant, prompts_from
from bot.chat.slack.commands import STYLE, SlackCommands
from bot.chat.slack.direct import DirectEvents
from bot.chat.slack.directory import ThreadMemory, UserGroups
from bot.chat.slack.events import BotIdentity, EventRules, Ignored, SlackMessage, classify, retry_num
from bot.chat.slack.http_guard import slack_body_guard
from bot.chat.slack.manifest import FILE_HOSTS, PLATFORM, is_id
from bot.chat.slack.output import SlackReply
from bot.chat.slack.rest import SlackOutbox, web_client
from bot.chat.slack.web import error_of, web_api
from bot.engine.errors import ConfigError
from bot.engine.messages import Scope
from bot.records.inbox import InboxItem

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
CLAIMS = "slack-message"  # the key is `channel:ts`: one claim catches a retry and a second event alike


def pipeline(parts: PlatformParts, directory: Directory) -> Pipeline:
    """Slack's settings for the one inbound pipeline (bot/chat/core/pipeline.py)."""
    settings = parts.settings
    lists = AccessList("YOKEBOT_SLACK_ALLOWED_USERS / _CHANNELS / _ALLOW_DMS",
                       users=entries(settings.slack_allowed_users, PLATFORM),
                       channels=entries(settings.slack_allowed_channels, PLATFORM), dms=settings.slack_allow_dms)
    limits = PipelineLimits(settings.slack_max_concurrent_turns, settings.slack_drain_seconds)
    return platform_pipeline(PLATFORM, parts, lists, limits, namespace=CLAIMS, directory=directory, is_id=is_id,
                             redelivers=True)  # an envelope not acknowledged comes again


class SlackAdapter:
    platform = PLATFORM

    def __init__(self, parts: PlatformParts) -> None:
        settings = parts.settings
        self._token = required(settings.slack_bot_token, "Slack needs SLACK_BOT_TOKEN.")
        if settings.slack_app_token is None and settings.slack_signing_secret is None:
            raise ConfigError("SLACK_BOT_TOKEN is set, but neither SLACK_APP_TOKEN (Socket Mode) nor "
                              "SLACK_SIGNING_SECRET (HTTP Events mode) is: set one of them.")
        self.settings = settings
        self.mode = "socket" if settings.slack_app_token is not None else "http"
        self.files = FileFetcher(PLATFORM, (*FILE_HOSTS, settings.slack_api_url), self._token)  # attached files
        self.outbox = SlackOutbox(settings)  # posting: answers, notify, scheduled reports
        self.web, self.poster, self.directory = self.outbox.web, self.outbox.poster, self.outbox.directory
        self.groups, self.threads = UserGroups(self.web), ThreadMemory(self.web)
        self.pipeline = pipeline(parts, self)
        # Bolt gets a client without a token: `authorize` supplies it, so no auth.test per request.
        secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else None

        # Bolt passes arguments by parameter name, so it gets plain closures rather than bound methods.
        async def authorize(enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
            return await self._authorize(enterprise_id, team_id)

        async def on_event(body: dict[str, Any], request: AsyncBoltRequest) -> BoltResponse | None:
            return await self._on_event(body, request.headers)

        self.bolt = AsyncApp(client=web_client(settings, None), authorize=authorize, signing_secret=secret,
                             process_before_response=True, request_verification_enabled=self.mode == "http",
                             logger=logging.getLogger("slack_bolt.yokebot"))
        self.bolt.assistant(build_assistant(prompts_from(settings.slack_suggested_prompts)))  # pyright: ignore[reportUnknownMemberType]  # Bolt's decorators are untyped
        self.bolt.event(re.compile(".*"))(on_event)  # pyright: ignore[reportUnknownMemberType]  # Bolt's decorators are untyped
        # `/yokebot <sub>` (bot/chat/slack/commands.py): the same pipeline, claimed by trigger_id before the ack
        self.commands = SlackCommands(platform_commands(self.pipeline, parts, STYLE), self.poster, self.threads,
                                      settings.slack_api_url, lambda: live_options(settings), self._team,
                                      lambda: self.web.session)
        self.commands.mount(self.bolt)
        self.rules = EventRules(not settings.slack_answer_bots, settings.slack_thread_followups)
        self.direct = DirectEvents(self._on_event, secret)  # channel messages and mentions skip Bolt's stack
        self.identity: BotIdentity | None = None
        self.socket: AsyncSocketModeHandler | None = None
        self._mounted = False

    # --- lifecycle ----------------------------------------------------------------------------------------
    async def start(self) -> None:
        await self.outbox.share_session(self.bolt.client)
        await self._whoami()
        if self.mode == "socket":
            assert self.settings.slack_app_token is not None
            self.socket = AsyncSocketModeHandler(self.bolt, self.settings.slack_app_token.get_secret_value())
            listeners = self.socket.client.socket_mode_request_listeners
            listeners[:] = [self.direct.socket_handler(self.socket.handle) if h == self.socket.handle else h
                            for h in listeners]
            await self.socket.connect_async()
        log.info("Slack is on (%s mode) as %s", "Socket" if self.mode == "socket" else "HTTP Events",
                 self.identity.user_id if self.identity else "?")

    def mount(self, http: web.Application) -> None:
        """HTTP Events mode: serve `/slack/events` on yokebot's HTTP server."""
        if self.mode == "http":
            http.router.add_post(EVENTS_PATH, self.handle_http)
            http.middlewares.append(slack_body_guard(EVENTS_PATH))  # a malformed body: 400, not Bolt's 500
            self._mounted = True

    def is_connected(self) -> bool:
        """For /readyz: Socket Mode: the websocket is open; HTTP Events mode: the route is mounted and the token
        was accepted. False once stopping."""
        if self.pipeline.closing or self.identity is None:
            return False
        if self.mode == "http":
            return self._mounted
        client = self.socket.client if self.socket is not None else None
        session = getattr(client, "current_session", None)
        return (client is not None and not client.closed and not getattr(client, "stale", False)
                and session is not None and not session.closed)

    async def handle_http(self, request: web.Request) -> web.Response:
        direct = await self.direct.http(await request.read(), request.headers)
        if direct is not None:
            return await to_aiohttp_response(direct)
        return await to_aiohttp_response(await self.bolt.async_dispatch(await to_bolt_request(request)))

    async def stop(self) -> None:
        """Stop taking events (answered 503: redelivered elsewhere), then drain the turns in flight."""
        self.pipeline.close()
        if self.socket is not None:
            await self.socket.close_async()
        await self.pipeline.drain()
        await self.outbox.stop()

    @property
    def busy(self) -> int:
        return self.pipeline.busy

    async def identify(self) -> BotIdentity:
        """Who the bot is (auth.test, once): needed before events, and before recovery rebuilds any."""
        return await self._whoami()

    async def _whoami(self) -> BotIdentity:
        if self.identity is None:
            try:
                resp = await web_api(self.web).auth_test()
            except SlackApiError as exc:
                raise ConfigError(f"Slack rejected SLACK_BOT_TOKEN ({error_of(exc)}).") from None
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                raise ConfigError(
                    f"Cannot reach the Slack API at {self.settings.slack_api_url} ({type(exc).__name__}: {exc}); "
                    "check the network, a proxy, or SLACK_API_URL."
                ) from None
            self.identity = BotIdentity(str(resp["user_id"]), resp.get("bot_id"), resp.get("team_id"))
        return self.identity

    async def _team(self) -> str | None:
        return (await self._whoami()).team_id

    async def _authorize(self, enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
        me = await self._whoami()
        return AuthorizeResult(enterprise_id=enterprise_id, team_id=team_id or me.team_id,
                               bot_token=self._token, bot_user_id=me.user_id, bot_id=me.bot_id)

    # --- inbound: parse, hand to the pipeline (which takes it exactly once before the ack) ----------------
    async def _on_event(self, body: dict[str, Any], headers: Mapping[str, Sequence[str]]) -> BoltResponse | None:
        found = classify(body, await self._whoami(), self.rules)
        if isinstance(found, Ignored):
            self.pipeline.ignored(found.reason, body.get("event_id"))
            return None
        retries = retry_num(headers)
        receipt = await self.pipeline.receive(self._inbound(found))
        if receipt is Receipt.CLOSING:  # not acked: Slack redelivers to an instance that is up
            return BoltResponse(status=503, body="shutting down")
        if retries > 0 and receipt is Receipt.TAKEN:
            log.info("Slack event %s came as retry %d but was never taken before: processing it",
                     found.event_id, retries)
        return None

    def _inbound(self, m: SlackMessage) -> Inbound:
        me = self.identity
        assert me is not None

        async def addressed() -> bool:
            return await self.threads.bot_in(m.channel, m.thread, me.user_id, me.bot_id)

        return Inbound(Origin(PLATFORM, m.channel, m.user, m.dm), m.thread, m.text, m.trigger,
                       SlackReply(self.poster, m.channel, m.ts, m.thread, m.reply_thread, self.threads,
                                  live_options(self.settings), me=me),
                       message_id=m.ts, claim_key=f"{m.channel}:{m.ts}",
                       addressed=addressed if m.trigger == "thread" else None,
                       target={"ts": m.ts, "reply_thread": m.reply_thread, "event_id": m.event_id,
                               **({"files": refs_json(m.files)} if m.files else {})},
                       files=self.files.sources(m.files))

    def rebuild(self, item: InboxItem) -> Inbound:
        """The message of an inbox row taken over after a restart, as `_inbound` made it (recovery)."""
        if item.trigger == "command":
            return self.commands.rebuild(item)
        t = item.reply
        trigger = item.trigger if item.trigger in ("mention", "dm", "thread") else "mention"
        return self._inbound(SlackMessage(item.channel, str(t["ts"]), item.thread, t.get("reply_thread"),
                                          item.text, item.user, trigger, t.get("event_id"), refs_from(t)))

    def mount_approvals(self, desk: ApprovalDesk) -> None:
        """Approve / Deny buttons and their clicks (`block_actions`, through Bolt)."""
        from bot.chat.slack.approvals import mount_approvals

        mount_approvals(self.bolt, desk, self.web, self.groups)

    def alert_threads(self) -> AlertThreads:
        """Alert roots, notes and edits (bot/chat/slack/alerts.py): through the outbox, as notify posts."""
        from bot.chat.slack.alerts import SlackAlertThreads

        return SlackAlertThreads(self.outbox)

    # --- what the pipeline may look up ----------------------------------------------------------------------
    async def channel_name(self, channel: str) -> str | None:
        return await self.directory.name_for(channel)

    async def groups_of(self, user: str) -> frozenset[str]:
        return await self.groups.of(user)

    # --- outbound: notify, schedules ----------------------------------------------------------------------
    async def post(self, channel: str, text: str, within: Scope | None = None) -> str:
        """Post to `#name` or a channel ID (into `within`'s thread when it is that channel); returns
        `slack:<id>:<ts>` (see SlackOutbox.post)."""
        return await self.outbox.post(channel, text, within)
