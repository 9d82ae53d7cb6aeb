"""`POST /hooks/alertmanager` and `POST /hooks/grafana` (aiohttp handlers), mounted by bot/observability/http.py
only when YOKEBOT_WEBHOOK_TOKEN is set.

In order: the bearer token (compared in constant time; 401 and nothing read or stored), the size (413 over
1 MB), the body (400 with one sentence when it is not UTF-8 JSON, nested too deep, or not the sender's shape),
then the body is stored and committed and the sender gets 200. Alertmanager and Grafana resend a delivery answered
5xx, with backoff, for as long as it is answered so: a 503 means "send it again" and is only for a database that
is away or busy. A body that can never be stored (the database refuses that row, or anything else goes wrong
with it) is a 400 with one sentence, or it would be resent forever."""

from __future__ import annotations

import hmac
import logging
from typing import Any

from aiohttp import web
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from bot.alerts.desk import AlertDesk
from bot.alerts.payloads import MAX_BODY_BYTES, BadPayload, Source

log = logging.getLogger(__name__)


_AWAY_STATES = ("08", "53", "57P", "40001", "40P01")  # SQLSTATE: connection, resources, shutdown, retry the transaction


def _json(code: int, **body: Any) -> web.Response:
    return web.json_response(body, status=code)


def database_away(exc: BaseException) -> bool:
    """The database is unreachable, restarting, busy or out of connections: the same body will be stored later.
    Any other error (a row the database refuses, a fault of ours) would fail again on every resend."""
    if isinstance(exc, OperationalError | InterfaceError | PoolTimeout | OSError | TimeoutError):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    state = str(getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None) or "")
    return exc.connection_invalidated or state.startswith(_AWAY_STATES)


def _first_line(exc: BaseException) -> str:
    """The driver's own first line (never SQLAlchemy's text, which carries the statement's parameters: the body)."""
    cause = exc.orig if isinstance(exc, DBAPIError) else exc
    return (str(cause).strip().splitlines() or [""])[0][:200]


class Webhooks:
    def __init__(self, desk: AlertDesk, token: str) -> None:
        self.desk = desk
        self._token = f"Bearer {token}".encode()

    def authorized(self, request: web.Request) -> bool:
        return hmac.compare_digest(request.headers.get("Authorization", "").encode(), self._token)

    async def alertmanager(self, request: web.Request) -> web.Response:
        return await self._receive(request, "alertmanager")

    async def grafana(self, request: web.Request) -> web.Response:
        return await self._receive(request, "grafana")

    async def _read(self, request: web.Request) -> bytes | None:
        if (request.content_length or 0) > MAX_BODY_BYTES:
            return None
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.content.iter_chunked(64 * 1024):
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    async def _receive(self, request: web.Request, source: Source) -> web.Response:
        if not self.authorized(request):
            log.warning("%s webhook from %s refused: no or a wrong bearer token", source, request.remote)
            return _json(401, error="A valid `Authorization: Bearer <YOKEBOT_WEBHOOK_TOKEN>` header is needed.")
        body = await self._read(request)
        if body is None:
            return _json(413, error=f"The body is larger than {MAX_BODY_BYTES // 1024} KiB.")
        try:
            stored = await self.desk.accept(source, body)
        except BadPayload as exc:
            log.warning("%s webhook refused: %s", source, exc)
            return _json(400, error=str(exc))
        except Exception as exc:
            if database_away(exc):  # the sender retries
                log.warning("%s webhook could not be stored (%s); the sender will retry", source, type(exc).__name__)
                return _json(503, error="The alert could not be stored right now; send it again.")
            log.warning("%s webhook could not be stored (%s: %s); refused, not to be resent", source,
                        type(exc).__name__, _first_line(exc))
            return _json(400, error=f"This body cannot be stored ({type(exc).__name__}); it was not kept.")
        return _json(200, status="accepted", id=stored)
