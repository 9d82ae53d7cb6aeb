"""`/readyz` and `/metrics` on the HTTP server of `yokebot run` (`/healthz` stays the liveness probe).

Ready means: the database takes a write on our schema (a no-op UPDATE of `alembic_version`: a read-only
or unwritable SQLite file, a full disk or a read-only PostgreSQL fail it, where a SELECT still passes; and,
for SQLite, its file still exists), and every registered chat adapter that reports its connection
(`is_connected()`, see bot/chat/core/base.py) is connected.
With no adapters configured, readiness is the database alone, and the body carries a `warning` saying that
nothing will answer chats. MCP servers are shown (`"mcp"`) but do not decide readiness: a down server costs
its tools, not the bot, and is reconnected in the background.

With YOKEBOT_METRICS_TOKEN set, `/readyz` and `/metrics` answer only a request that carries
`Authorization: Bearer <token>` (compared in constant time; 401 otherwise); `/healthz` stays open for liveness
probes that cannot send a header."""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from aiohttp import web
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.chat.core.base import ReadinessProbe
from bot.chat.platforms import PLATFORMS
from bot.observability.backlog import Backlog
from bot.observability.metrics import Metrics
from bot.store.db import SQLITE_BUSY_TIMEOUT_MS


class _Adapters(Protocol):
    @property
    def adapters(self) -> Mapping[str, Any]: ...


class AlertHooks(Protocol):
    """The alert webhooks (bot/alerts/webhooks.py), when YOKEBOT_WEBHOOK_TOKEN is set (docs/alerts.md)."""

    async def alertmanager(self, request: web.Request) -> web.Response: ...
    async def grafana(self, request: web.Request) -> web.Response: ...


class _McpStates(Protocol):
    def states(self) -> dict[str, dict[str, Any]]: ...


class Observed(Protocol):
    """What the routes read of the running bot (`bot.app.App` is one)."""

    @property
    def engine(self) -> AsyncEngine: ...
    @property
    def notifier(self) -> _Adapters: ...
    @property
    def metrics(self) -> Metrics | None: ...
    @property
    def mcp(self) -> _McpStates | None: ...  # the MCP servers, when an agent declares any

log = logging.getLogger(__name__)
DB_TIMEOUT_SECONDS = 3.0
_WRITE_PROBE = text("UPDATE alembic_version SET version_num = version_num")
NO_PLATFORM = (f"no chat platform is configured (set {' or '.join(e.token_variable for e in PLATFORMS)}): nothing "
               "will answer chats; only schedules run")


def _sqlite_file_missing(engine: AsyncEngine) -> bool:
    url = engine.url
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return False
    # an open connection keeps working on a deleted file; the data would be gone at the next start
    return not os.path.exists(str(url.database))


async def database_ready(engine: AsyncEngine) -> tuple[bool, str]:
    if _sqlite_file_missing(engine):
        return False, "the database file is missing"
    sqlite = engine.dialect.name == "sqlite"
    try:
        async with asyncio.timeout(DB_TIMEOUT_SECONDS), engine.begin() as conn:
            if sqlite:  # a locked file fails the probe within its timeout, not after the 10 s busy wait
                await conn.exec_driver_sql(f"PRAGMA busy_timeout={int(DB_TIMEOUT_SECONDS * 500)}")
            try:
                await conn.execute(_WRITE_PROBE)  # committed: a file that cannot take the commit fails here
            finally:
                if sqlite:
                    await conn.exec_driver_sql(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    except Exception as exc:
        log.warning("readiness: database check failed: %s", type(exc).__name__)
        return False, f"database check failed ({type(exc).__name__})"
    return True, "ok"


def adapters_ready(adapters: Mapping[str, Any]) -> dict[str, str]:
    """platform -> "connected" | "disconnected" | "unknown" (an adapter without the probe)."""
    states: dict[str, str] = {}
    for platform, adapter in adapters.items():
        if isinstance(adapter, ReadinessProbe):
            states[platform] = "connected" if adapter.is_connected() else "disconnected"
        else:
            states[platform] = "unknown"
    return states


async def readiness(bot: Observed) -> tuple[bool, dict[str, Any]]:
    db_ok, db_detail = await database_ready(bot.engine)
    adapters = adapters_ready(bot.notifier.adapters)
    ok = db_ok and all(state != "disconnected" for state in adapters.values())
    body: dict[str, Any] = {"status": "ready" if ok else "not ready", "database": db_detail, "adapters": adapters}
    if not adapters:
        body["warning"] = NO_PLATFORM
    if bot.mcp is not None:
        body["mcp"] = bot.mcp.states()
    return ok, body


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
READY_FRESH_SECONDS = 1.0  # a readiness answer serves the requests of this long (probes come every few seconds)
T = TypeVar("T")


class Shared(Generic[T]):
    """One check for every request that comes while it runs or within `fresh` seconds of its end: `/readyz` writes
    to the database, and with the port reachable (Slack's HTTP events, Mattermost's commands, no metrics token) a
    flood of requests was a flood of commits, taking the pool's connections and SQLite's write lock from turns."""

    def __init__(self, check: Callable[[], Awaitable[T]], fresh: float) -> None:
        self.check, self.fresh = check, fresh
        self._running: asyncio.Future[T] | None = None
        self._done_at = 0.0

    async def __call__(self) -> T:
        loop = asyncio.get_running_loop()
        if self._running is None or (self._running.done() and loop.time() - self._done_at > self.fresh):
            self._running = asyncio.ensure_future(self._run())
        return await asyncio.shield(self._running)

    async def _run(self) -> T:
        try:
            return await self.check()
        finally:
            self._done_at = asyncio.get_running_loop().time()


def bearer_only(token: str | None, handler: Handler) -> Handler:
    """`handler` behind `Authorization: Bearer <token>` when a token is set; as it is when not."""
    if not token:
        return handler
    expected = f"Bearer {token}".encode()

    async def guarded(request: web.Request) -> web.StreamResponse:
        if not hmac.compare_digest(request.headers.get("Authorization", "").encode(), expected):
            # neither the token sent nor the one expected is logged; nothing about the bot is answered
            return web.Response(status=401, text="a bearer token is required (YOKEBOT_METRICS_TOKEN)\n",
                                headers={"WWW-Authenticate": "Bearer"})
        return await handler(request)

    return guarded


def add_observability_routes(http: web.Application, bot: Observed, *, token: str | None = None,
                             lease_seconds: float = 30.0, backlog_every: float = 5.0,
                             ready_fresh: float = READY_FRESH_SECONDS) -> None:
    """`/readyz` and `/metrics`; with `token` (YOKEBOT_METRICS_TOKEN) both ask for it as a bearer token.
    `lease_seconds`: YOKEBOT_INBOX_LEASE_SECONDS, exported beside the inbox's figures, which are read from the
    database at most once every `backlog_every` seconds; `/readyz`'s at most once every `ready_fresh` seconds,
    however many ask (`Shared`)."""
    backlog = Backlog(bot.engine, bot.metrics, lease_seconds, every=backlog_every) \
        if bot.metrics is not None else None

    checked = Shared(lambda: readiness(bot), ready_fresh)

    async def readyz(_: web.Request) -> web.Response:
        ok, body = await checked()
        return web.json_response(body, status=200 if ok else 503)

    async def metrics(_: web.Request) -> web.Response:
        if bot.metrics is None:
            return web.Response(status=404, text="this process exports no metrics\n")
        if backlog is not None:
            await backlog.refresh()
        return web.Response(body=bot.metrics.render(), headers={"Content-Type": bot.metrics.content_type})

    http.router.add_get("/readyz", bearer_only(token, readyz))
    http.router.add_get("/metrics", bearer_only(token, metrics))


def add_alert_routes(http: web.Application, hooks: AlertHooks | None) -> None:
    """`POST /hooks/alertmanager` and `/hooks/grafana`; none without a webhook token: never open by default."""
    if hooks is not None:
        http.router.add_post("/hooks/alertmanager", hooks.alertmanager)
        http.router.add_post("/hooks/grafana", hooks.grafana)
