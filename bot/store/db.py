"""The async engine, SQLite tuning, and migrations applied from code (`yokebot db upgrade` and first start)."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import event, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool
from sqlalchemy.util import await_

from bot.store.pooling import POOLED_CONNECT_ARGS

if TYPE_CHECKING:  # Alembic loads only to migrate (or when the quick check below is unsure)
    from alembic.config import Config

log = logging.getLogger(__name__)
MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"  # a path, not an import: env.py imports us


SQLITE_BUSY_TIMEOUT_MS = 10_000  # how long a statement waits for another connection's write lock


def sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    # WAL + NORMAL: commits without an fsync each, readers never block the writer; still crash-safe.
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cur.close()


def _drop_closed(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
    """At checkout, replace a connection the server has closed (a PostgreSQL restart) without a round trip.
    `pool_pre_ping` did the same with three (BEGIN, ping, ROLLBACK) on every checkout: a third of a turn's
    database time (bench/README.md). A disconnect seen mid-statement still invalidates the pool."""
    is_closed = getattr(getattr(dbapi_conn, "driver_connection", None), "is_closed", None)
    if is_closed is not None and is_closed():
        raise DisconnectionError("the database closed this connection")  # the pool retries with a new one


def _note_server_pid(dbapi_conn: Any, record: Any) -> None:
    """Behind a session pooler, the process id asyncpg is told at connect is the pooler's: ask the server once per
    connection (the writer's lost-commit check ends that process, bot/store/writer.py)."""
    driver = dbapi_conn.driver_connection
    record.info[SERVER_PID] = await_(driver.fetchval("SELECT pg_backend_pid()"))


SERVER_PID = "yokebot_server_pid"  # key of a pooled connection's `info`: its server process, asked at connect


def server_pid(conn: AsyncConnection, driver: Any) -> int:
    """The server process of a connection: asked at connect (`server_pids`), else as asyncpg was told."""
    found = conn.info.get(SERVER_PID)
    return int(found) if found is not None else int(driver.get_server_pid())


def create_engine(url: str, *, pooled: bool = False, server_pids: bool = False, **kwargs: Any) -> AsyncEngine:
    """`pooled`: PostgreSQL through a pooler, no statement named (bot/store/pooling.py); `server_pids`: each
    connection asks the server for its process id at connect (behind a session pooler)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, **kwargs)
        event.listen(engine.sync_engine, "connect", sqlite_pragmas)
        return engine
    if pooled:
        kwargs["connect_args"] = POOLED_CONNECT_ARGS | kwargs.get("connect_args", {})
    engine = create_async_engine(url, **kwargs)
    if not kwargs.get("pool_pre_ping"):
        event.listen(engine.sync_engine, "checkout", _drop_closed)
    if server_pids:
        event.listen(engine.sync_engine, "connect", _note_server_pid)
    return engine


def alembic_config(url: str | None = None) -> Config:
    from alembic.config import Config

    cfg = Config(stdout=sys.stdout)  # today's stdout, not the one of whenever Alembic was first imported
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def _upgrade(conn: Connection, cfg: Config, revision: str) -> None:
    from alembic import command

    cfg.attributes["connection"] = conn
    command.upgrade(cfg, revision)


def current_revision(conn: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn).get_current_revision()


MIGRATION_LOCK = 0x79_6F_6B_65_62_6F_74  # "yokebot": the PostgreSQL advisory lock held while migrating
MIGRATION_WAIT_SECONDS = 120.0


class MigrationLockTimeout(Exception):
    """Another process held the migration lock for longer than we wait."""


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    async with engine.connect() as conn, migration_lock(conn):
        await conn.run_sync(_upgrade, alembic_config(), revision)
        await conn.commit()


@asynccontextmanager
async def migration_lock(conn: AsyncConnection) -> AsyncGenerator[None, None]:
    """On PostgreSQL, one process migrates at a time: two instances starting together on an empty database
    would otherwise both create the tables, and the loser exit. SQLite needs none: the migration's own write
    transaction serialises, and `yokebot run` owns the file (bot/store/filelock.py)."""
    if conn.dialect.name != "postgresql":
        yield
        return
    try:
        async with asyncio.timeout(MIGRATION_WAIT_SECONDS):
            await conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK})
    except TimeoutError:
        raise MigrationLockTimeout(
            f"another yokebot process has been migrating this database for over {MIGRATION_WAIT_SECONDS:.0f} s"
        ) from None
    await conn.commit()  # the lock belongs to the session, not to the transaction
    try:
        yield
    finally:
        await conn.rollback()
        await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK})
        await conn.commit()


_REVISION = re.compile(r"^(down_revision|revision)\s*(?::[^=]*)?=\s*(.+)$", re.MULTILINE)


def _single_head() -> str | None:
    """The head revision read from the migration files' `revision =` / `down_revision =` lines, without
    importing Alembic (a fifth of `yokebot chat`'s start-up); None when unsure (a merge, odd syntax)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        found = dict(_REVISION.findall(path.read_text(encoding="utf-8")))
        rev, down = found.get("revision", "").strip(), found.get("down_revision", "").strip()
        if not re.fullmatch(r"['\"][\w.-]+['\"]", rev) or not re.fullmatch(r"None|['\"][\w.-]+['\"]", down):
            if rev or down:
                return None
            continue
        revisions.add(rev[1:-1])
        if down != "None":
            parents.add(down[1:-1])
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


async def _at_head(engine: AsyncEngine) -> bool:
    head = _single_head()
    if head is None:
        return False
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalars().all()
    except DBAPIError:  # no table yet: a new database
        return False
    return list(rows) == [head]


async def ensure_schema(engine: AsyncEngine, *, direct_url: str | None = None) -> None:
    """Migrate to head when behind (first start of the embedded SQLite database, or after an upgrade). Safe
    when several instances start together: they take turns under the lock, and the later ones find head.
    `direct_url`: `engine` goes through a pooler; the migration (its session lock) goes on this URL instead."""
    if await _at_head(engine):
        return
    if direct_url is not None:
        direct = create_engine(direct_url, poolclass=NullPool)
        try:
            await _migrate(direct)
        finally:
            await direct.dispose()
        return
    await _migrate(engine)


async def _migrate(engine: AsyncEngine) -> None:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    async with engine.connect() as conn:
        if await conn.run_sync(current_revision) == head:
            return
        await conn.rollback()
        async with migration_lock(conn):
            current = await conn.run_sync(current_revision)
            if current != head:
                log.info("migrating database from %s to %s", current or "empty", head)
                await conn.run_sync(_upgrade, alembic_config(), "head")
                await conn.commit()
