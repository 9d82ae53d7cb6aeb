"""One turn per conversation thread at a time across instances on PostgreSQL: an advisory lock on the
thread's key for the length of the turn. The key is the thread's, not its session's, so that the lock is
taken before the session is opened: a session made under it has had no other turn (and no history to read).

All of a process's thread locks live on one connection of their own (advisory locks belong to a database
session; the turn's writes never queue behind it). In one process the service's own lock already lets only
one turn per thread through, so here a lock is taken with `pg_try_advisory_lock`, which answers at once;
a thread busy on another instance is asked again with backoff (50 ms, doubling to 1 s) until it is free.
Why not `pg_advisory_lock` on a connection per held lock: a connection per running turn capped the turns in
flight at the pool's size (200 turns at once waited for 16 connections, in waves; beyond the pool's
timeout they failed).

The statements go straight through asyncpg, in autocommit, and the ones asked for while the connection is
busy go together in the next round trip: one `SELECT` over an array of keys that releases and tries them
all (unlocks first), each caller getting its own answer. 200 turns starting (or ending) at once are then a
few round trips, not 200 in a row on one connection. Each is shielded: a turn cancelled mid-statement
never breaks the connection the other turns' locks are on (a lock granted to a turn that was cancelled
meanwhile is released). If the connection dies, the server drops its locks with it; the next lock opens a
new one (one the server closed while it sat idle, a restart, is replaced before a statement is sent on it).
SQLite needs none of this: `yokebot run` owns the file (bot/store/filelock.py), and in one process the
service's own lock does it."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.store.db import create_engine

log = logging.getLogger(__name__)
_TRY = "try"
_UNLOCK = "unlock"
# unlocks (op true) and tries (op false) of a batch, in the arrays' order: one answer per key
_BATCH = ("SELECT CASE WHEN t.op THEN pg_advisory_unlock(t.k) ELSE pg_try_advisory_lock(t.k) END "
          "FROM unnest($1::bigint[], $2::bool[]) WITH ORDINALITY AS t(k, op, n) ORDER BY t.n")


def lock_key(conversation: str) -> int:
    """A signed 64-bit key from the conversation key (advisory locks take a bigint)."""
    return int.from_bytes(hashlib.blake2b(f"yokebot-thread:{conversation}".encode(), digest_size=8).digest(),
                          "big", signed=True)


class PgSessionLock:
    def __init__(self, engine: AsyncEngine, *, poll: float = 0.05, max_poll: float = 1.0) -> None:
        self.engine = engine
        self.poll, self.max_poll = poll, max_poll
        self._conn: AsyncConnection | None = None
        self._driver: Any = None  # the asyncpg connection under `_conn`
        self._io = asyncio.Lock()  # one statement at a time on the connection
        self._queued: list[tuple[str, int, asyncio.Future[bool]]] = []  # for the next round trip
        self._drain: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[Any]] = set()

    @classmethod
    def for_url(cls, url: str) -> PgSessionLock:
        return cls(create_engine(url, pool_size=1, max_overflow=0, isolation_level="AUTOCOMMIT"))

    async def _run(self, op: str, key: int) -> bool:
        """Queue the statement for the next round trip and wait for its answer. One drain task sends
        everything queued by the time the connection is free (callers never queue for the connection one
        by one: with 200 of them, waking each in turn took 200 loop iterations)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        self._queued.append((op, key, future))
        if self._drain is None or self._drain.done():
            self._drain = loop.create_task(self._drain_queue(), name="yokebot-thread-locks")
        return await future

    async def _drain_queue(self) -> None:
        async with self._io:
            while self._queued:
                batch, self._queued = self._queued, []
                await self._send(sorted(batch, key=lambda item: item[0] != _UNLOCK))  # stable: unlocks first

    async def _send(self, batch: list[tuple[str, int, asyncio.Future[bool]]]) -> None:
        try:
            if self._conn is not None and self._driver.is_closed():  # the server ended it (a restart) while idle
                conn, self._conn = self._conn, None
                await conn.invalidate()  # its locks went with it; a new connection, no failed round trip
            if self._conn is None:
                self._conn = await self.engine.connect()
                self._driver = (await self._conn.get_raw_connection()).driver_connection
            try:
                rows = await self._driver.fetch(_BATCH, [k for _, k, _ in batch], [op == _UNLOCK for op, _, _ in batch])
            except BaseException:
                conn, self._conn = self._conn, None
                await conn.invalidate()  # the server drops the locks held on it
                raise
        except BaseException as exc:
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, _, future), row in zip(batch, rows, strict=True):
            if not future.done():
                future.set_result(bool(row[0]))

    async def _statement(self, sql: str, key: int) -> Any:
        """Run it to the end even if the caller is cancelled meanwhile (see the module's note)."""
        task = asyncio.get_running_loop().create_task(self._run(sql, key))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if sql is _TRY:
                task.add_done_callback(lambda t: self._release_if_granted(t, key))
            raise

    def _release_if_granted(self, task: asyncio.Task[Any], key: int) -> None:
        if not task.cancelled() and task.exception() is None and task.result():
            self._unlock_soon(key)

    def _unlock_soon(self, key: int) -> None:
        """Release in the background: the turn that held the lock does not wait for the round trip."""
        release = asyncio.get_running_loop().create_task(self._unlock(key))
        self._pending.add(release)
        release.add_done_callback(self._pending.discard)

    async def _unlock(self, key: int) -> None:
        try:
            await self._statement(_UNLOCK, key)
        except Exception as exc:  # the connection died (an outage): the server dropped the lock with it
            log.warning("could not release the lock of a thread (%s)", type(exc).__name__)

    @asynccontextmanager
    async def hold(self, conversation: str) -> AsyncGenerator[None, None]:
        key, wait = lock_key(conversation), self.poll
        while not await self._statement(_TRY, key):  # another instance runs a turn in this thread
            await asyncio.sleep(wait)
            wait = min(wait * 2, self.max_poll)
        try:
            yield
        finally:
            # not awaited: the turn's answer is out, and whatever comes next for this key in this process goes
            # through the same queue after the unlock (advisory locks count: a take queued before it still
            # leaves the lock held once); another instance waits for it as before. `close` waits for it.
            self._unlock_soon(key)

    async def close(self) -> None:
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()
        await self.engine.dispose()
