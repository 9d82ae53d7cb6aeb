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

from sqlalchemy import Connection, Engine, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import Executable

from bot.engine.errors import YokebotError
from bot.redact import cut
from bot.store.db import sqlite_pragmas

log = logging.getLogger(__name__)

Write = tuple[Executable, dict[str, Any], str | None]  # statement, parameters, owner (a turn id)
T = TypeVar("T")


class WriteFailed(YokebotError):
    """Some of a turn's rows could not be committed; the message is one sentence, the details are logged."""


def _transient(exc: BaseException) -> bool:
    """Worth retrying: the database is busy, restarting or unreachable. A bad row is not."""
    if isinstance(exc, OperationalError | InterfaceError | OSError):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def _sqlite_writer(engine: AsyncEngine) -> Engine | None:
    """For a SQLite file, a synchronous engine on the same file for the writer's own thread: a whole batch is
    then one hop to that thread, where aiosqlite makes several hops per statement through the event loop."""
    url = engine.url
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    sync = create_sync_engine(url.set(drivername="sqlite"), pool_size=1, max_overflow=0)
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
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []  # (target sequence number, future)
        self._failed: dict[str, str] = {}  # owner -> why some of its rows were refused
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def _ensure_writer(self) -> None:
        """Start the writer task on the running loop (again, if it ended or a new loop took over)."""
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._run(), name="yokebot-write-behind")
        self._wake.set()

    def put(self, statement: Executable, params: dict[str, Any], owner: str | None = None) -> None:
        self._pending.append((statement, params, owner))
        self._queued += 1
        self._ensure_writer()

    async def flush(self, owner: str | None = None) -> None:
        """Return once every write queued before this call is committed (or given up on); with an owner,
        raise WriteFailed if any of that owner's rows was refused."""
        target = self._queued
        if self._done < target:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append((target, future))
            self._ensure_writer()
            await future
        if owner is not None and owner in self._failed:
            raise WriteFailed(f"the database refused part of this turn's records ({self._failed.pop(owner)})")

    async def close(self) -> None:
        if self._queued > self._done:
            await self.flush()
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
                if not await self._commit_retrying(batch):
                    await self._commit_one_by_one(batch)
                self._done += len(batch)
                self._release()

    async def _commit(self, batch: list[Write]) -> None:
        if self._thread is not None:
            await asyncio.get_running_loop().run_in_executor(self._thread, self._commit_sync, batch)
            return
        async with self.engine.begin() as conn:
            for statement, group in _runs(batch):
                await conn.execute(statement, group)  # executemany, in queue order

    async def _commit_retrying(self, batch: list[Write]) -> bool:
        """Commit the batch in one transaction, retrying while the database is only busy or away."""
        for attempt in range(1, self.attempts + 1):
            try:
                await self._commit(batch)
                return True
            except Exception as exc:
                if not _transient(exc) or attempt == self.attempts:
                    log.warning("a batch of %d rows failed (%s); committing them one by one", len(batch),
                                _first_line(exc))
                    return False
                await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
        return False  # pragma: no cover

    async def _commit_one_by_one(self, batch: list[Write]) -> None:
        """One refused row must not take the other turns' rows with it: each row alone, failures noted."""
        for write in batch:
            try:
                await self._commit([write])
            except Exception as exc:
                reason = _first_line(exc)
                log.error("a %s row of turn %s was refused by the database: %s",
                          getattr(write[0], "table", "?"), write[2], reason)
                if write[2] is not None:
                    self._failed.setdefault(write[2], reason)

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
        still: list[tuple[int, asyncio.Future[None]]] = []
        for target, future in self._waiters:
            if target > self._done:
                still.append((target, future))
            elif not future.done():
                future.set_result(None)
        self._waiters = still


def _first_line(exc: BaseException) -> str:
    """The driver's message without the SQL and parameters SQLAlchemy appends (they may hold user text)."""
    orig = getattr(exc, "orig", None) or exc
    first = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
    return cut(first, 300)[0]  # redacted before it is cut: this text is stored and logged


def _runs(batch: list[Write]) -> Iterable[tuple[Executable, list[dict[str, Any]]]]:
    """Consecutive writes of the same statement with the same columns go out as one executemany."""
    for (statement, _keys), items in groupby(batch, key=lambda w: (w[0], tuple(w[1]))):
        yield statement, [params for _, params, _ in items]
