"""One turn per session at a time across instances on PostgreSQL: `pg_advisory_lock` on the session's key,
held on a connection of a small pool of its own for the length of the turn.

Why a connection per held lock: an advisory lock belongs to a database session, and a pooled connection
that goes back with the lock still held would lock out everyone. Why its own pool: the turn's writes must
not queue behind connections that only hold locks. SQLite needs none of this: `yokebot run` owns the file
(bot/store/filelock.py), and in one process the service's own lock does it."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store.db import create_engine

log = logging.getLogger(__name__)
_LOCK = text("SELECT pg_advisory_lock(:k)")
_UNLOCK = text("SELECT pg_advisory_unlock(:k)")


def lock_key(session_id: str) -> int:
    """A signed 64-bit key from the session id (advisory locks take a bigint)."""
    return int.from_bytes(hashlib.blake2b(f"yokebot-session:{session_id}".encode(), digest_size=8).digest(),
                          "big", signed=True)


class PgSessionLock:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    @classmethod
    def for_url(cls, url: str, size: int) -> PgSessionLock:
        return cls(create_engine(url, pool_size=size, max_overflow=size))

    @asynccontextmanager
    async def hold(self, session_id: str) -> AsyncIterator[None]:
        key = lock_key(session_id)
        async with self.engine.connect() as conn:
            await conn.execute(_LOCK, {"k": key})
            await conn.commit()  # the lock is the session's; no transaction stays open for the turn
            try:
                yield
            finally:
                try:
                    await conn.execute(_UNLOCK, {"k": key})
                    await conn.commit()
                except Exception as exc:  # the connection died (an outage): the server dropped the lock with it
                    log.warning("could not release the lock of session %s (%s)", session_id, type(exc).__name__)
                    await conn.invalidate()

    async def close(self) -> None:
        await self.engine.dispose()
