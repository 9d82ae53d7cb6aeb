"""One turn per conversation thread at a time across instances on PostgreSQL: `pg_advisory_lock` on the
thread's key, held on a connection of a small pool of its own for the length of the turn. The key is the
thread's, not its session's, so that the lock is taken before the session is opened: a session made under
it has had no other turn (and no history to read).

Why a connection per held lock: an advisory lock belongs to a database session, and a pooled connection
that goes back with the lock still held would lock out everyone. Why its own pool: the turn's writes must
not queue behind connections that only hold locks. SQLite needs none of this: `yokebot run` owns the file
(bot/store/filelock.py), and in one process the service's own lock does it."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store.db import create_engine

log = logging.getLogger(__name__)
_LOCK = "SELECT pg_advisory_lock($1)"
_UNLOCK = "SELECT pg_advisory_unlock($1)"


def lock_key(thread: str) -> int:
    """A signed 64-bit key from the thread's key (advisory locks take a bigint)."""
    return int.from_bytes(hashlib.blake2b(f"yokebot-thread:{thread}".encode(), digest_size=8).digest(),
                          "big", signed=True)


class PgSessionLock:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    @classmethod
    def for_url(cls, url: str, size: int) -> PgSessionLock:
        return cls(create_engine(url, pool_size=size, max_overflow=size, isolation_level="AUTOCOMMIT"))

    @asynccontextmanager
    async def hold(self, thread: str) -> AsyncIterator[None]:
        key = lock_key(thread)
        # autocommit (no transaction stays open for the turn) and straight through asyncpg: taking or
        # releasing the lock is one round trip, without SQLAlchemy's statement machinery around it
        async with self.engine.connect() as conn:
            driver: Any = (await conn.get_raw_connection()).driver_connection
            try:
                await driver.fetchval(_LOCK, key)
            except BaseException:  # also cancelled while waiting: the lock may be granted anyway, so the
                await conn.invalidate()  # connection is closed (which releases it), never pooled with it
                raise
            try:
                yield
            finally:
                try:
                    await driver.fetchval(_UNLOCK, key)
                except Exception as exc:  # the connection died (an outage): the server dropped the lock with it
                    log.warning("could not release the lock of a thread (%s)", type(exc).__name__)
                    await conn.invalidate()

    async def close(self) -> None:
        await self.engine.dispose()
