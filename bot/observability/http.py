"""`/readyz` and `/metrics` on the HTTP server of `yokebot run` (`/healthz` stays the liveness probe).

Ready means: the database takes a write on our schema (a no-op UPDATE of `alembic_version`: a read-only
or unwritable SQLite file, a full disk or a read-only PostgreSQL fail it, where a SELECT still passes; and,
for SQLite, its file still exists), and every
registered chat adapter that reports its connection (`is_connected()`, see bot/chat/base.py) is connected.
With no adapters configured, readiness is the database alone."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any

from aiohttp import web
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.chat.base import ReadinessProbe

if TYPE_CHECKING:
    from bot.app import App

log = logging.getLogger(__name__)
DB_TIMEOUT_SECONDS = 3.0
_WRITE_PROBE = text("UPDATE alembic_version SET version_num = version_num")


def _sqlite_file_missing(engine: AsyncEngine) -> bool:
    url = engine.url
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return False
    # an open connection keeps working on a deleted file; the data would be gone at the next start
    return not os.path.exists(str(url.database))


async def database_ready(engine: AsyncEngine) -> tuple[bool, str]:
    if _sqlite_file_missing(engine):
        return False, "the database file is missing"
    try:
        async with asyncio.timeout(DB_TIMEOUT_SECONDS), engine.begin() as conn:
            await conn.execute(_WRITE_PROBE)  # committed: a file that cannot take the commit fails here
    except Exception as exc:
        log.warning("readiness: database check failed: %s", type(exc).__name__)
        return False, f"database check failed ({type(exc).__name__})"
    return True, "ok"


def adapters_ready(adapters: dict[str, Any]) -> dict[str, str]:
    """platform -> "connected" | "disconnected" | "unknown" (an adapter without the probe)."""
    states: dict[str, str] = {}
    for platform, adapter in adapters.items():
        if isinstance(adapter, ReadinessProbe):
            states[platform] = "connected" if adapter.is_connected() else "disconnected"
        else:
            states[platform] = "unknown"
    return states


async def readiness(bot: App) -> tuple[bool, dict[str, Any]]:
    db_ok, db_detail = await database_ready(bot.engine)
    adapters = adapters_ready(bot.notifier.adapters)
    ok = db_ok and all(state != "disconnected" for state in adapters.values())
    return ok, {"status": "ready" if ok else "not ready", "database": db_detail, "adapters": adapters}


def add_observability_routes(http: web.Application, bot: App) -> None:
    async def readyz(_: web.Request) -> web.Response:
        ok, body = await readiness(bot)
        return web.json_response(body, status=200 if ok else 503)

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=bot.metrics.render(), headers={"Content-Type": bot.metrics.content_type})

    http.router.add_get("/readyz", readyz)
    http.router.add_get("/metrics", metrics)
