"""Microsoft Teams through the Bot Framework: activities arrive at `/teams/messages` on yokebot's HTTP server,
each with a JWT that is checked before anything is read (bot/chat/teams/auth.py); mentions in channels and group
chats, and personal chats, are parsed into `Inbound` (bot/chat/teams/events.py) and handed to the inbound
pipeline, which stores each in the durable inbox (its claim: the activity) before the 200 goes back.

Replies go to the activity's serviceUrl, which must be on the allow-list (`YOKEBOT_TEAMS_SERVICE_URLS`), with the
bot's own token (client credentials). Every conversation a validated activity comes from is remembered as a
conversation reference, so notify, schedules and alerts can post there later (bot/chat/teams/directory.py)."""

from __future__ import annotations

import json
import logging
from typing import Any, cast

from aiohttp import web

from bot.approvals.desk import ApprovalDesk
from bot.chat.core.access import AccessList, Origin, entries
from bot.chat.core.base import Directory, Inbound, Trigger
from bot.chat.core.pipeline import Pipeline, PipelineLimits, Receipt
from bot.chat.core.platform import PlatformParts
from bot.chat.core.progress import live_options
from bot.chat.core.threads import AlertThreads
from bot.chat.core.wiring import platform_pipeline
from bot.chat.teams.approvals import TeamsApprovalButtons, answer_click, mount_approvals
from bot.chat.teams.auth import InboundAuth, Unauthorized, bearer
from bot.chat.teams.connector import ConnectorError, TokenRefused, digest
from bot.chat.teams.events import Click, Ignored, Place, TeamsMessage, classify, fields, place_of, tenant_of
from bot.chat.teams.manifest import PLATFORM, is_id
from bot.chat.teams.output import TeamsReply
from bot.chat.teams.rest import TeamsOutbox
from bot.engine.errors import ConfigError
from bot.engine.messages import Scope
from bot.records.inbox import InboxItem

log = logging.getLogger(__name__)

MESSAGES_PATH = "/teams/messages"
MAX_BODY_BYTES = 256 * 1024
CLAIMS = PLATFORM  # the key is the activity id with its conversation's digest


def pipeline(parts: PlatformParts, directory: Directory) -> Pipeline:
    """Teams' settings for the one inbound pipeline (bot/chat/core/pipeline.py)."""
    settings = parts.settings
    lists = AccessList("YOKEBOT_TEAMS_ALLOWED_USERS / _CHANNELS",
                       users=entries(settings.teams_allowed_users, PLATFORM),
                       channels=entries(settings.teams_allowed_channels, PLATFORM))
    limits = PipelineLimits(settings.teams_max_concurrent_turns, settings.teams_drain_seconds)
    return platform_pipeline(PLATFORM, parts, lists, limits, namespace=CLAIMS, directory=directory, is_id=is_id)


def _status(code: int, text: str = "") -> web.Response:
    return web.Response(status=code, text=text)


class TeamsAdapter:
    platform = PLATFORM

    def __init__(self, parts: PlatformParts) -> None:
        settings = parts.settings
        if settings.teams_app_id is None:
            raise ConfigError("Teams needs TEAMS_APP_ID.")
        self.settings = settings
        self.outbox = TeamsOutbox(settings, parts.conversations)  # posting: answers, notify, scheduled reports
        self.connector, self.messages, self.places = self.outbox.connector, self.outbox.messages, self.outbox.places
        self.auth = InboundAuth(settings, self.connector.http)
        self.pipeline = pipeline(parts, self.places)
        self.desk: ApprovalDesk | None = None
        self.buttons: TeamsApprovalButtons | None = None
        self.identified = False
        self._mounted = False

    # --- lifecycle ------------------------------------------------------------------------------------------
    async def identify(self) -> None:
        """A token for the Bot Connector, and the keys inbound tokens are checked against: bad credentials are
        one clear ConfigError at start-up, not a silent bot."""
        if self.identified:
            return
        try:
            await self.connector.token.get()
        except TokenRefused as exc:
            raise ConfigError(f"Microsoft refused the Teams credentials (TEAMS_APP_ID / TEAMS_APP_PASSWORD / "
                              f"TEAMS_TENANT_ID): {exc}.") from None
        except (OSError, TimeoutError, ValueError) as exc:
            raise ConfigError(f"Cannot fetch a Teams token from {self.connector.token.url} "
                              f"({type(exc).__name__}: {exc}); check the network, a proxy, or TEAMS_LOGIN_URL.") \
                from None
        try:
            await self.auth.refresh()
        except Exception as exc:  # checked again at the first request: not fatal, but said
            log.warning("teams: cannot read the OpenID metadata at %s yet (%s)", self.auth.metadata_url, exc)
        self.identified = True

    async def start(self) -> None:
        await self.identify()
        log.info("Teams is on: activities at %s for app %s", MESSAGES_PATH, self.settings.teams_app_id)

    async def stop(self) -> None:
        """Stop taking activities (answered 503), drain the turns in flight, close the connector's session."""
        self.pipeline.close()
        await self.pipeline.drain()
        await self.outbox.stop()

    @property
    def busy(self) -> int:
        return self.pipeline.busy

    def is_connected(self) -> bool:
        """For /readyz: the route is mounted and the credentials were accepted; False once stopping."""
        return self._mounted and self.identified and not self.pipeline.closing

    # --- the registry's other hooks (bot/chat/core/platform.py) ---------------------------------------------
    def mount(self, http: web.Application) -> None:
        http.router.add_post(MESSAGES_PATH, self.handle)
        self._mounted = True

    def mount_approvals(self, desk: ApprovalDesk) -> None:
        """Approve / Deny on an Adaptive Card; the clicks come back through `/teams/messages`."""
        self.desk, self.buttons = desk, mount_approvals(desk, self.messages, self.places)

    def alert_threads(self) -> AlertThreads:
        from bot.chat.teams.alerts import TeamsAlertThreads

        return TeamsAlertThreads(self.messages, self.places)

    async def post(self, channel: str, text: str, within: Scope | None = None) -> str:
        """notify / schedules: `#name` or a channel or chat id (bot/chat/teams/rest.py); into `within`'s reply chain
        when it is that channel."""
        return await self.outbox.post(channel, text, within)

    # --- inbound: validate, parse, hand to the pipeline -----------------------------------------------------
    async def handle(self, request: web.Request) -> web.Response:
        token = bearer(request.headers.get("Authorization"))
        if token is None:
            return _status(401, "a Bot Framework token is required")
        try:
            claims, key = await self.auth.verify(token)
        except Unauthorized as exc:
            log.warning("teams: refused a request to %s: %s", MESSAGES_PATH, exc)
            return _status(401, "invalid token")
        if (request.content_length or 0) > MAX_BODY_BYTES:
            return _status(413)
        try:
            body = await request.read()  # whole (aiohttp caps it at client_max_size); a partial read is not JSON
            if len(body) > MAX_BODY_BYTES:
                return _status(413)
            activity = json.loads(body)
        except ValueError:
            return _status(400, "the body is not a JSON activity")
        if not isinstance(activity, dict):
            return _status(400, "the body is not a JSON activity")
        activity = cast(dict[str, Any], activity)
        try:
            InboundAuth.check_activity(claims, key, activity)
        except Unauthorized as exc:
            log.warning("teams: refused an activity: %s", exc)
            return _status(401, "invalid token")
        return await self.received(activity)

    async def received(self, activity: dict[str, Any]) -> web.Response:
        """A validated activity: refused when it names a serviceUrl off the allow-list or another tenant."""
        service_url = str(activity.get("serviceUrl") or "")
        if not self.connector.allowed(service_url):
            log.warning("teams: refused an activity whose serviceUrl %r is not on YOKEBOT_TEAMS_SERVICE_URLS",
                        service_url)
            return _status(403, "serviceUrl not allowed")
        tenant = self.settings.teams_tenant_id
        if tenant is not None and tenant_of(activity) not in (tenant, None):
            log.warning("teams: refused an activity from tenant %s (TEAMS_TENANT_ID is %s)", tenant_of(activity),
                        tenant)
            return _status(403, "another tenant")
        if activity.get("type") in ("message", "conversationUpdate"):
            channel = fields(fields(activity.get("channelData")).get("channel"))
            await self.places.learn(place_of(activity), channel.get("name"))
        found = classify(activity)
        if isinstance(found, Ignored):
            self.pipeline.ignored(found.reason, activity.get("id"))
            return _status(200)
        if isinstance(found, Click):
            if self.desk is not None and self.buttons is not None:
                await answer_click(self.desk, self.buttons, found)
            return _status(200)
        receipt = await self.pipeline.receive(self._inbound(found))
        return _status(503, "shutting down") if receipt is Receipt.CLOSING else _status(200)

    def _inbound(self, m: TeamsMessage) -> Inbound:
        return self._message(m.place, m.activity, m.channel, m.thread, m.text, m.user, m.trigger,
                             f"{m.activity}@{digest(m.place.conversation)}")

    def _message(self, place: Place, activity: str, channel: str, thread: str, text: str, user: str | None,
                 trigger: Trigger, claim_key: str) -> Inbound:
        reply = TeamsReply(self.messages, place, thread, live_options(self.settings))
        return Inbound(Origin(PLATFORM, channel, user, trigger == "dm"), thread, text, trigger, reply,
                       message_id=activity, claim_key=claim_key, target={**place.json(), "activity": activity})

    def rebuild(self, item: InboxItem) -> Inbound:
        """The message of an inbox row taken over after a restart (or an alert's investigation), as `_inbound`
        made it, from the stored reference."""
        t = item.reply
        trigger: Trigger = "dm" if item.trigger == "dm" else "mention"
        place = Place.of(t) if t.get("service_url") else self.places.known(item.channel)
        if place is None:
            raise ConnectorError(0, f"no conversation reference for {item.channel}")
        return self._message(place, str(t.get("activity") or ""), item.channel, item.thread, item.text, item.user,
                             trigger, item.event_key)

    # --- what the pipeline may look up (bot/chat/teams/directory.py) ----------------------------------------
    async def channel_name(self, channel: str) -> str | None:
        return await self.places.channel_name(channel)

    async def groups_of(self, user: str) -> frozenset[str]:
        return await self.places.groups_of(user)
