"""Write-behind for the turn's audit trail: messages, model calls, tool calls and turn rows are queued and
committed in order, in batches, by one background task; a turn waits for its rows once, when it finishes.

Why: a turn writes ~15 rows. Committing each on the turn's critical path cost more than the model calls
themselves against a fast endpoint (bench/README.md, benchmark 1), and 200 concurrent turns each
committing alone serialised on the database. Batching keeps every row and their order; what a crash can
lose shrinks to the rows of the last few milliseconds, and a finished turn's rows are always committed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from itertools import groupby
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import Executable

log = logging.getLogger(__name__)

Write = tuple[Executable, dict[str, Any]]
T = TypeVar("T")


class WriteFailed(RuntimeError):
    """Rows could not be committed after retries; the message says how many and why."""


def _sqlite_writer(engine: AsyncEngine) -> Engine | None:
    """For a SQLite file, a synchronous engine on the same file for the writer's own thread: a whole batch is
    then one hop to that thread, where aiosqlite makes several hops per statement through the event loop."""
    url = engine.url
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    from bot.store.db import sqlite_pragmas  # local: db.py imports this module's users

    sync = create_sync_engine(url.set(drivername="sqlite"), pool_size=1, max_overflow=0)
    from sqlalchemy import event

    event.listen(sync, "connect", sqlite_pragmas)
    return sync


class WriteBehind:
    def __init__(self, engine: AsyncEngine, *, attempts: int = 3, backoff: float = 0.1) -> None:
        self.engine = engine
        self._sync = _sqlite_writer(engine)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="yokebot-writer") if self._sync else None
        self.attempts = attempts
        self.backoff = backoff
        self._pending: list[Write] = []
        self._queued = 0  # sequence number of the last queued write
        self._done = 0  # sequence number of the last write committed (or given up on)
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []  # (done at wait, target, future)
        self._failures: list[tuple[int, int, BaseException]] = []  # (first seq, last seq, error)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def _ensure_writer(self) -> None:
        """Start the writer task on the running loop (again, if it ended or a new loop took over)."""
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._run(), name="yokebot-write-behind")
        self._wake.set()

    def put(self, statement: Executable, params: dict[str, Any]) -> None:
        self._pending.append((statement, params))
        self._queued += 1
        self._ensure_writer()

    async def flush(self) -> None:
        """Return once every write queued before this call is committed; raise WriteFailed if one was not."""
        target = self._queued
        if self._done >= target:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((self._done, target, future))
        self._ensure_writer()
        await future

    async def close(self) -> None:
        if self._queued > self._done:
            try:
                await self.flush()
            except WriteFailed:
                log.exception("rows were lost at shutdown")
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._thread is not None and self._sync is not None:
            self._thread.shutdown(wait=True)
            self._sync.dispose()  # a later use opens a fresh connection, on a fresh thread
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="yokebot-writer")

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                batch, self._pending = self._pending, []
                error = await self._commit(batch)
                if error is not None:
                    self._failures.append((self._done + 1, self._done + len(batch), error))
                self._done += len(batch)
                self._release()

    async def _commit(self, batch: list[Write]) -> BaseException | None:
        for attempt in range(1, self.attempts + 1):
            try:
                if self._thread is not None:
                    await asyncio.get_running_loop().run_in_executor(self._thread, self._commit_sync, batch)
                else:
                    async with self.engine.begin() as conn:
                        for statement, group in _runs(batch):
                            await conn.execute(statement, group)  # executemany, in queue order
                return None
            except Exception as exc:  # the database is down, busy, or a row is bad
                if attempt == self.attempts:
                    log.error("could not commit %d audit rows after %d attempts: %s", len(batch), attempt, exc)
                    return exc
                await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
        return None  # pragma: no cover

    @property
    def threaded(self) -> bool:
        """True for a SQLite file: the store may run its hot queries on the writer's thread (`call`)."""
        return self._thread is not None

    async def call(self, fn: Callable[[Connection], T], *, write: bool = False) -> T:
        """Run `fn` on the writer thread's own SQLite connection: one hop, in order with the batches."""
        assert self._thread is not None and self._sync is not None, "only for a threaded (SQLite) store"
        sync = self._sync

        def run() -> T:
            with sync.begin() if write else sync.connect() as conn:
                return fn(conn)

        return await asyncio.get_running_loop().run_in_executor(self._thread, run)

    def _commit_sync(self, batch: list[Write]) -> None:
        assert self._sync is not None
        with self._sync.begin() as conn:
            for statement, group in _runs(batch):
                conn.execute(statement, group)

    def _release(self) -> None:
        still: list[tuple[int, int, asyncio.Future[None]]] = []
        for since, target, future in self._waiters:
            if target > self._done:
                still.append((since, target, future))
                continue
            # a failed batch that may have held rows of this waiter fails it (conservatively)
            error = next((e for lo, hi, e in self._failures if lo <= target and hi > since), None)
            if future.done():
                continue
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(WriteFailed(f"the database did not accept this turn's records: {error}"))
        self._waiters = still
        oldest = min((since for since, _, _ in still), default=self._done)
        self._failures = [f for f in self._failures if f[1] > oldest]


def _runs(batch: list[Write]) -> Iterable[tuple[Executable, list[dict[str, Any]]]]:
    """Consecutive writes of the same statement with the same columns go out as one executemany."""
    for (statement, _keys), items in groupby(batch, key=lambda w: (w[0], tuple(w[1]))):
        yield statement, [params for _, params in items]
