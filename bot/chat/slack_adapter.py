"""Slack through Bolt (async): mentions, DMs and thread follow-ups, in Socket Mode or HTTP Events mode.

The Bolt listener only decides and claims (exactly once, in the database) before Slack gets its ack; the
turn runs in a tracked background task. Everything agent-like happens in AgentService."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError

from bot.chat.base import EventCounter, InboundMessage, OutboundMessage
from bot.chat.inbox_turns import InboxTurns
from bot.chat.slack_events import (
    PLATFORM,
    BotIdentity,
    EventClaims,
    EventRules,
    Ignored,
    classify,
    mentions,
    retry_num,
)
from bot.chat.slack_output import FAILED, WORKING
from bot.chat.slack_post import SlackOutbox, web_client
from bot.chat.slack_routing import AccessPolicy, Router
from bot.config import Settings
from bot.engine.errors import ConfigError
from bot.engine.inbox import InboxItem
from bot.engine.profiles import AgentProfile
from bot.engine.service import AgentService

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
ACK_FIRST_SECONDS = 1.0  # the longest a turn waits for the acks of a burst (Slack retries after 3 s)
SORRY = "Sorry, something went wrong on my side and I could not answer this; the details are in my logs."
STOPPED = "Sorry, I was restarted before I could finish this; please ask again."
REFUSED = "Sorry, you don't have access to me here. Ask your yokebot admin if you need it."


class SlackAdapter:
    platform = PLATFORM

    def __init__(self, settings: Settings, service: AgentService, profiles: Mapping[str, AgentProfile],
                 claims: EventClaims, metrics: EventCounter | None = None,
                 inbox: InboxTurns | None = None) -> None:
        if settings.slack_bot_token is None:
            raise ConfigError("Slack needs SLACK_BOT_TOKEN.")
        if settings.slack_app_token is None and settings.slack_signing_secret is None:
            raise ConfigError("SLACK_BOT_TOKEN is set, but neither SLACK_APP_TOKEN (Socket Mode) nor "
                              "SLACK_SIGNING_SECRET (HTTP Events mode) is: set one of them.")
        self.settings, self.service, self.profiles, self.claims = settings, service, profiles, claims
        self.metrics = metrics
        self.inbox = inbox  # the durable inbox: claims store the event, recovery resumes it (inbox_turns.py)
        self.mode = "socket" if settings.slack_app_token is not None else "http"
        self._token = settings.slack_bot_token.get_secret_value()
        self.outbox = SlackOutbox(settings)  # posting: answers, notify, scheduled reports
        self.web, self.poster, self.directory = self.outbox.web, self.outbox.poster, self.outbox.directory
        # Bolt gets a client without a token: `authorize` supplies it, so no auth.test per request.
        bolt_client = web_client(settings, None)
        secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else None
        # Bolt passes arguments by parameter name, so it gets plain closures rather than bound methods.
        async def authorize(enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
            return await self._authorize(enterprise_id, team_id)

        async def on_event(body: dict[str, Any], request: AsyncBoltRequest) -> BoltResponse | None:
            return await self._on_event(body, request)

        self.bolt = AsyncApp(client=bolt_client, authorize=authorize, signing_secret=secret,
                             process_before_response=True, request_verification_enabled=self.mode == "http",
                             logger=logging.getLogger("slack_bolt.yokebot"))
        self.bolt.event(re.compile(".*"))(on_event)
        self.router = Router(profiles, settings.default_agent, self.directory)
        self.access = AccessPolicy(frozenset(settings.slack_allowed_users),
                                   frozenset(settings.slack_allowed_channels), settings.slack_allow_dms)
        self.rules = EventRules(settings.slack_ignore_bots, settings.slack_thread_followups)
        self.identity: BotIdentity | None = None
        self.socket: AsyncSocketModeHandler | None = None
        self._slots = asyncio.Semaphore(settings.slack_max_concurrent_turns)
        self._tasks: set[asyncio.Task[None]] = set()
        self._threads: OrderedDict[tuple[str, str], None] = OrderedDict()  # threads the bot is part of
        self._closing = False
        self._acking = 0  # events between the listener's start and its return: their acks are not out yet
        self._acked = asyncio.Event()
        self._acked.set()
        self._mounted = False

    # --- lifecycle ----------------------------------------------------------------------------------------
    async def start(self) -> None:
        await self._whoami()
        if self.mode == "socket":
            assert self.settings.slack_app_token is not None
            self.socket = AsyncSocketModeHandler(self.bolt, self.settings.slack_app_token.get_secret_value())
            await self.socket.connect_async()
        log.info("Slack is on (%s mode) as %s", "Socket" if self.mode == "socket" else "HTTP Events",
                 self.identity.user_id if self.identity else "?")

    def mount(self, http: web.Application) -> None:
        """HTTP Events mode: serve `/slack/events` on yokebot's HTTP server."""
        if self.mode == "http":
            http.router.add_post(EVENTS_PATH, self.handle_http)
            self._mounted = True

    def is_connected(self) -> bool:
        """For /readyz: Socket Mode: the websocket is open; HTTP Events mode: the route is mounted and the token
        was accepted. False once stopping."""
        if self._closing or self.identity is None:
            return False
        if self.mode == "http":
            return self._mounted
        client = self.socket.client if self.socket is not None else None
        session = getattr(client, "current_session", None)
        return (client is not None and not client.closed and not getattr(client, "stale", False)
                and session is not None and not session.closed)

    def _count(self, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.adapter_event(PLATFORM, kind)

    async def handle_http(self, request: web.Request) -> web.Response:
        return await to_aiohttp_response(await self.bolt.async_dispatch(await to_bolt_request(request)))

    async def stop(self) -> None:
        """Stop taking events, let turns in flight finish (up to slack_drain_seconds), cancel the rest."""
        self._closing = True
        if self.socket is not None:
            await self.socket.close_async()
        deadline = asyncio.get_running_loop().time() + self.settings.slack_drain_seconds
        # events already past the closing check are claimed and acked: wait for them to spawn their turn
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._acked.wait(), timeout=min(5.0, self.settings.slack_drain_seconds))
        while self._tasks:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                pending = set(self._tasks)
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                break
            await asyncio.wait(set(self._tasks), timeout=left)

    @property
    def busy(self) -> int:
        return len(self._tasks)

    async def _whoami(self) -> BotIdentity:
        if self.identity is None:
            try:
                resp = await self.web.auth_test()
            except SlackApiError as exc:
                raise ConfigError(f"Slack rejected SLACK_BOT_TOKEN ({exc.response.get('error')}).") from None
            self.identity = BotIdentity(str(resp["user_id"]), resp.get("bot_id"), resp.get("team_id"))
        return self.identity

    async def _authorize(self, enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
        me = await self._whoami()
        return AuthorizeResult(enterprise_id=enterprise_id, team_id=team_id or me.team_id,
                               bot_token=self._token, bot_user_id=me.user_id, bot_id=me.bot_id)

    # --- inbound: decide and claim before the ack -------------------------------------------------------
    async def _on_event(self, body: dict[str, Any], request: AsyncBoltRequest) -> BoltResponse | None:
        self._acking += 1
        self._acked.clear()
        try:
            return await self._decide(body, request)
        finally:
            self._acking -= 1
            if self._acking == 0:
                self._acked.set()

    async def _decide(self, body: dict[str, Any], request: AsyncBoltRequest) -> BoltResponse | None:
        if self._closing:  # not acked: Slack redelivers to an instance that is up
            return BoltResponse(status=503, body="shutting down")
        found = classify(body, await self._whoami(), self.rules)
        if isinstance(found, Ignored):
            log.debug("ignored Slack event %s: %s", body.get("event_id"), found.reason)
            self._count("ignored")
            return None
        retries = retry_num(request.headers)
        # One claim per event, on the message: a redelivered event and a second event for the same message
        # (app_mention + message.im) are both caught by it, and it is the only database write before the ack.
        message_key = f"{found.channel}:{found.message_id}"
        item: InboxItem | None = None
        if self.inbox is not None:
            item = await self.inbox.claim(found, message_key)
            taken = item is not None
        else:
            taken = await self.claims.claim_event("slack-message", message_key)
        if not taken:
            log.info("Slack message %s (event %s, retry %d) was already taken: acknowledged, not processed again",
                     message_key, found.event_id, retries)
            self._count("duplicate")
            return None
        if found.trigger != "thread":  # a thread message counts once we know the bot is part of the thread
            self._count(found.trigger)
        if retries > 0:
            log.info("Slack event %s came as retry %d but was never taken before: processing it",
                     found.event_id, retries)
        self._spawn(found, item)
        return None

    def _spawn(self, msg: InboundMessage, item: InboxItem | None = None) -> None:
        task = asyncio.create_task(self._answer(msg, item), name=f"slack:{msg.channel}:{msg.message_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- the turn, in the background ----------------------------------------------------------------------
    async def _after_acks(self) -> None:
        """Let the acks of a burst go out first: a turn's database writes and Slack calls would slow them."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._acked.wait(), timeout=ACK_FIRST_SECONDS)

    async def _answer(self, msg: InboundMessage, item: InboxItem | None = None) -> None:
        try:
            await self._after_acks()
            if msg.trigger == "thread":
                mine = await self._bot_in_thread(msg.channel, msg.thread)
                self._count("thread" if mine else "ignored")
                if not mine:
                    await self._settle(item, "skipped", "a thread the bot is not part of")
                    return
            dm = bool(msg.extra.get("is_dm"))
            agent = self.settings.default_agent if dm else await self.router.agent_for(msg.channel)
            reason = self.access.refusal(msg.user, msg.channel, dm, self.profiles.get(agent))
            if reason is not None:
                log.warning("refused Slack message %s from %s in %s: %s", msg.message_id, msg.user,
                            msg.channel, reason)
                self._count("refused")
                await self.poster.post(msg.channel, REFUSED, msg.extra.get("reply_thread"))
                await self._settle(item, "skipped", f"refused: {reason}")
                return
            await self._run_turn(msg, agent, item)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Slack message %s in %s could not be handled", msg.message_id, msg.channel)
            self._count("error")
            await self._settle(item, "failed", "could not be handled")

    async def _settle(self, item: InboxItem | None, state: str, note: str | None = None) -> None:
        if item is not None and self.inbox is not None:
            await self.inbox.settle(item, state, note)

    async def _run_turn(self, msg: InboundMessage, agent: str, item: InboxItem | None = None) -> None:
        channel, ts, thread = msg.channel, str(msg.message_id), msg.extra.get("reply_thread")
        await self.poster.react(channel, ts, WORKING)
        ok = False
        try:
            async with self._slots:
                if item is not None and self.inbox is not None:
                    result = await self.inbox.run(item, msg.to_request(agent), self.service)
                else:
                    result = await self.service.handle(msg.to_request(agent))
            text, ok = result.answer or "(no answer)", result.error is None
        except asyncio.CancelledError:
            await self._last_word(channel, ts, thread)
            await self._settle(item, "interrupted", "yokebot stopped during this turn; the user was told")
            raise
        except Exception:
            log.exception("turn for Slack message %s in %s failed", ts, channel)
            text = SORRY
            self._count("error")
        try:
            await self.poster.post(channel, text, thread)
            self._remember_thread(channel, msg.thread)
        except SlackApiError as exc:
            log.error("could not post the answer to %s in %s: %s", ts, channel, exc.response.get("error"))
            ok = False
        except Exception:  # formatting or transport: the user still gets one sentence, and the mark
            log.exception("could not post the answer to %s in %s", ts, channel)
            ok = False
            with contextlib.suppress(Exception):
                await self.poster.post(channel, SORRY, thread)
        await self.poster.finish(channel, ts, ok)
        await self._settle(item, "answered" if ok else "failed")

    # --- recovery: an inbox event whose instance died (bot/chat/inbox_turns.py decides) -------------------
    async def resume(self, item: InboxItem) -> None:
        """Run the event again (it never started, or nothing side-effecting ran), or tell the thread."""
        assert self.inbox is not None
        msg = self.inbox.message(item)
        note = await self.inbox.recover(item)
        if note is None:
            self._spawn(msg, item)
            return
        thread = msg.extra.get("reply_thread")
        try:
            await self.poster.post(msg.channel, note, thread)
            await self.poster.react(msg.channel, str(msg.message_id), FAILED)
        except Exception:
            log.exception("could not tell Slack thread %s in %s about the restart", thread, msg.channel)
            return  # the lease runs out and the next take-over tries again
        await self._settle(item, "interrupted", note)

    async def _last_word(self, channel: str, ts: str, thread: str | None) -> None:
        """Shutting down mid-turn: tell the user in one sentence rather than leave :eyes: forever."""
        try:
            await asyncio.wait_for(self._post_failure(channel, ts, thread), timeout=5)
        except Exception:
            log.warning("could not tell Slack that message %s was dropped at shutdown", ts)

    async def _post_failure(self, channel: str, ts: str, thread: str | None) -> None:
        await self.poster.post(channel, STOPPED, thread)
        await self.poster.react(channel, ts, WORKING, remove=True)
        await self.poster.react(channel, ts, FAILED)

    def _remember_thread(self, channel: str, thread: str) -> None:
        self._threads[(channel, thread)] = None
        self._threads.move_to_end((channel, thread))
        while len(self._threads) > 10_000:
            self._threads.popitem(last=False)

    async def _bot_in_thread(self, channel: str, thread_ts: str) -> bool:
        """A thread the bot answered in or was mentioned in; survives restarts via conversations.replies."""
        if (channel, thread_ts) in self._threads:
            return True
        me = await self._whoami()
        try:
            resp = await self.web.conversations_replies(channel=channel, ts=thread_ts, limit=200)
        except SlackApiError as exc:
            log.info("cannot read thread %s in %s: %s", thread_ts, channel, exc.response.get("error"))
            return False
        for m in resp.get("messages") or []:
            if m.get("user") == me.user_id or (me.bot_id and m.get("bot_id") == me.bot_id) \
                    or mentions(str(m.get("text") or ""), me.user_id):
                self._remember_thread(channel, thread_ts)
                return True
        return False

    # --- outbound: notify, schedules ----------------------------------------------------------------------
    async def send(self, message: OutboundMessage) -> str:
        return await self.outbox.send(message)

    async def post(self, channel: str, text: str) -> str:
        """Post to `#name` or a channel ID; returns `slack:<id>:<ts>` (see SlackOutbox.post)."""
        return await self.outbox.post(channel, text)
