"""The events yokebot answers most (messages and mentions in channels) go straight to the adapter, past
Bolt's middleware stack (authorization, the self-event filter, the assistant middleware, listener matching):
that stack was three quarters of each event's work before its ack, and a burst of 200 waited for all of it
(bench/slack_ack.py). What it did for these events is done here or needs no doing:

- HTTP: the signature is checked as Bolt checks it (`SignatureVerifier`: HMAC, timestamp within 5 min); a
  request that fails goes to Bolt, which answers 401 as before.
- The bot's own messages are dropped by `classify` (bot/chat/slack/events.py), as Bolt's filter did.
- Authorization gave the listener a token it does not use (one workspace, one bot token).
- A DM may be an assistant thread, whose events Bolt's assistant middleware may answer itself: every DM goes
  through Bolt, as does every other kind of request (clicks, assistant events, URL verification, SSL check).

The ack is what Bolt's would have been: none for a 503 (shutting down: Slack redelivers elsewhere) or a
failure (Slack retries), an empty 200 otherwise."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from slack_bolt.adapter.socket_mode.async_internals import send_async_response
from slack_bolt.response import BoltResponse
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest

from bot.chat.slack.events import is_dm
from bot.chat.slack.web import fields

log = logging.getLogger(__name__)

DIRECT_EVENTS = frozenset({"app_mention", "message"})
Headers = Mapping[str, Sequence[str]]
OnEvent = Callable[[dict[str, Any], Headers], Awaitable[BoltResponse | None]]
BoltHandler = Callable[[Any, SocketModeRequest], Awaitable[None]]  # (the socket mode client, the request)


def is_direct(body: Any) -> bool:
    """A channel's message or mention: an event the adapter takes without Bolt."""
    if fields(body).get("type") != "event_callback":
        return False
    event = fields(fields(body).get("event"))
    return bool(event) and event.get("type") in DIRECT_EVENTS and not is_dm(event)


class DirectEvents:
    def __init__(self, on_event: OnEvent, signing_secret: str | None) -> None:
        self.on_event = on_event
        self.verifier = SignatureVerifier(signing_secret) if signing_secret else None

    def socket_handler(self, bolt: BoltHandler) -> BoltHandler:
        """Socket Mode: the listener that takes the place of Bolt's (`bolt`, which gets everything else)."""

        async def handle(client: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
            payload = fields(req.payload)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]  # untyped
            if req.type != "events_api" or not is_direct(payload):
                await bolt(client, req)
                return
            start = time.time()
            headers = {} if req.retry_attempt is None else {"x-slack-retry-num": [str(req.retry_attempt)]}
            await send_async_response(client, req, await self._run(cast(dict[str, Any], payload), headers), start)

        return handle

    async def http(self, raw: bytes, headers: Mapping[str, str]) -> BoltResponse | None:
        """HTTP Events mode: the response to a direct event whose signature is good; None: Bolt's to answer."""
        if self.verifier is None or not raw.startswith(b"{"):
            return None
        try:
            body = json.loads(raw)
        except ValueError:
            return None
        if not is_direct(body):
            return None
        try:
            valid = self.verifier.is_valid(raw, headers.get("X-Slack-Request-Timestamp"),
                                           headers.get("X-Slack-Signature"))
        except ValueError:  # a timestamp that is not a number
            valid = False
        if not valid:
            return None  # Bolt's request verification answers it (401), and logs it as it always has
        return await self._run(body, {k.lower(): [v] for k, v in headers.items() if k.lower().startswith("x-slack")})

    async def _run(self, body: dict[str, Any], headers: Headers) -> BoltResponse:
        try:
            response = await self.on_event(body, headers)
        except Exception:  # as Bolt does with a listener's error: no ack, Slack delivers it again
            log.exception("Slack event %s could not be taken", body.get("event_id"))
            return BoltResponse(status=500, body="")
        return response if response is not None else BoltResponse(status=200, body="")
