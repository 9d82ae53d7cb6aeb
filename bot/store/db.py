"""The async engine, SQLite tuning, and migrations applied from code (`yokebot db upgrade` and first start)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

log = logging.getLogger(__name__)
MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"  # a path, not an import: env.py imports us


def sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    # WAL + NORMAL: commits without an fsync each, readers never block the writer; still crash-safe.
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.close()


def _drop_closed(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
    """At checkout, replace a connection the server has closed (a PostgreSQL restart) without a round trip.
    `pool_pre_ping` did the same with three (BEGIN, ping, ROLLBACK) on every checkout: a third of a turn's
    database time (bench/README.md). A disconnect seen mid-statement still invalidates the pool."""
    is_closed = getattr(getattr(dbapi_conn, "driver_connection", None), "is_closed", None)
    if is_closed is not None and is_closed():
        raise DisconnectionError("the database closed this connection")  # the pool retries with a new one


def create_engine(url: str, **kwargs: Any) -> AsyncEngine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, **kwargs)
        event.listen(engine.sync_engine, "connect", sqlite_pragmas)
        return engine
    engine = create_async_engine(url, **kwargs)
    if not kwargs.get("pool_pre_ping"):
        event.listen(engine.sync_engine, "checkout", _drop_closed)
    return engine


def alembic_config(url: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def _upgrade(conn: Connection, cfg: Config, revision: str) -> None:
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, revision)


def _current(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    cfg = alembic_config()
    async with engine.begin() as conn:
        await conn.run_sync(_upgrade, cfg, revision)


async def ensure_schema(engine: AsyncEngine) -> None:
    """Migrate to head when behind (first start of the embedded SQLite database, or after an upgrade)."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    async with engine.connect() as conn:
        current = await conn.run_sync(_current)
    if current != head:
        log.info("migrating database from %s to %s", current or "empty", head)
        await upgrade(engine)
