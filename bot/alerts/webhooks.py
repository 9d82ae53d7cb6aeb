"""`POST /hooks/alertmanager` and `POST /hooks/grafana` (aiohttp handlers), mounted by bot/observability/http.py
only when YOKEBOT_WEBHOOK_TOKEN is set.

In order: the bearer token (compared in constant time; 401 and nothing read or stored), the size (413 over
1 MB), the body (400 with one sentence when it is not JSON or not the sender's shape), then the body is stored
and committed and the sender gets 200. Alertmanager retries a delivery that was not 2xx, so a 5xx (the database
is away) means "send it again", never "lost"."""

from __future__ import annotations

import hmac
import logging
from typing import Any

from aiohttp import web

from bot.alerts.desk import AlertDesk
from bot.alerts.payloads import MAX_BODY_BYTES, BadPayload, Source

log = logging.getLogger(__name__)


def _json(code: int, **body: Any) -> web.Response:
    return web.json_response(body, status=code)


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
        except UnicodeDecodeError:
            return _json(400, error="The body is not UTF-8 JSON.")
        except Exception as exc:  # the database is away: the sender retries
            log.warning("%s webhook could not be stored (%s); the sender will retry", source, type(exc).__name__)
            return _json(503, error="The alert could not be stored right now; send it again.")
        return _json(200, status="accepted", id=stored)
