"""Who runs the scheduler. On PostgreSQL: the process holding a session advisory lock on a dedicated
connection; the others try again every poll and take over once the leader's connection closes (the
server releases the lock when the process dies). On SQLite one process is assumed: it always leads."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Protocol

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool

log = logging.getLogger(__name__)
LOCK_KEY = int.from_bytes(hashlib.sha256(b"yokebot scheduler leader").digest()[:8], "big", signed=True)


class LeaderLock(Protocol):
    async def try_acquire(self) -> bool: ...
    async def still_held(self) -> bool: ...
    async def release(self) -> None: ...


class SingleProcessLock:
    """SQLite: one `yokebot run` per database file is assumed (see docs/scheduling.md)."""

    async def try_acquire(self) -> bool:
        return True

    async def still_held(self) -> bool:
        return True

    async def release(self) -> None:
        return None


class PostgresAdvisoryLock:
    def __init__(self, url: str, key: int = LOCK_KEY, timeout: float = 5.0) -> None:
        # Its own engine without a pool: the lock lives and dies with this one connection.
        self._engine = create_async_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
        self._conn: AsyncConnection | None = None
        self.key, self.timeout = key, timeout

    async def _query(self, sql: str, **params: object) -> object:
        if self._conn is None:
            self._conn = await asyncio.wait_for(self._engine.connect(), self.timeout)
        result = await asyncio.wait_for(self._conn.execute(text(sql), params), self.timeout)
        return result.scalar()

    async def try_acquire(self) -> bool:
        try:
            return bool(await self._query("SELECT pg_try_advisory_lock(:k)", k=self.key))
        except Exception as exc:
            log.warning("cannot reach PostgreSQL for the scheduler lock: %s", exc)
            await self._drop()
            return False

    async def still_held(self) -> bool:
        """The lock is a session lock: while this connection answers, it is ours."""
        try:
            await self._query("SELECT 1")
            return True
        except Exception as exc:
            log.warning("lost the scheduler lock connection: %s", exc)
            await self._drop()
            return False

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await asyncio.wait_for(conn.close(), self.timeout)
            except Exception:  # already broken; closing is best effort
                log.debug("closing the lock connection failed", exc_info=True)

    async def release(self) -> None:
        await self._drop()  # closing the session releases the lock
        await self._engine.dispose()


def leader_lock(database_url: str) -> LeaderLock:
    if make_url(database_url).get_backend_name() == "postgresql":
        return PostgresAdvisoryLock(database_url)
    return SingleProcessLock()
