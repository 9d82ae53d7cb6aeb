"""Write-behind for the turn's audit trail: messages, model calls, tool calls and turn rows are queued and
committed in order, in batches, by one background task; a turn waits for its rows once, when it finishes.

Why: a turn writes ~15 rows. Committing each on the turn's critical path cost more than the model calls
themselves against a fast endpoint (bench/README.md, benchmark 1), and 200 concurrent turns each
committing alone serialised on the database. Batching keeps every row and their order; what a crash can
lose shrinks to the rows of the last `linger` seconds (25 ms), and a finished turn's rows are always committed.

Per batch, not per row: the writer lingers a moment after the first queued row (a flush, or a batch grown
to `batch_rows`, cuts that short), so a fast turn's rows go in one transaction; and within a batch, rows of
the statements the store declares `reorderable` (plain INSERTs of audit rows) are gathered into one
executemany per statement between the other statements, which keep their place."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from itertools import groupby
from typing import Any, Literal, TypeVar, cast

from sqlalchemy import Connection, Engine, Table, event, text
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import Executable
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_delay, wait_exponential

from bot.engine.errors import YokebotError
from bot.redact import cut
from bot.store.db import server_pid, sqlite_pragmas
from bot.store.outage import transient
from bot.store.recordset import Recordsets, run_raw, with_defaults
from bot.store.sqlite_inserts import SqliteInserts

log = logging.getLogger(__name__)

Write = tuple[Executable, dict[str, Any], str | None]  # statement, parameters, owner (a turn id)
# Did this batch commit after all? Asked before a retry: a connection lost while COMMIT was on its way leaves
# that unknown, and writing the batch again would store its rows twice (or refuse it on a primary key).
Committed = Callable[[Connection, Sequence[Write]], bool]
T = TypeVar("T")
SQL_SHAPES = 256  # one-statement batch texts kept (a shape: the tables, and the columns of each)


@dataclass(frozen=True, slots=True)
class FoldedUpdate:
    """An UPDATE of one row by its key (`update`, its key parameter `param`) that is folded into the INSERT of
    the same row (`insert`, its key column `column`) when both are in one batch: a turn that finished within
    the writer's linger is one INSERT with its final values, not an INSERT and an UPDATE. Only for rows that
    nothing else in a batch reads."""

    update: Executable
    param: str
    insert: Executable
    column: str


class WriteFailed(YokebotError):
    """Some of a turn's rows could not be committed; the message is one sentence, the details are logged."""


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
    """`outage_seconds`: how long a database that is away is waited out (rows kept in memory, retried with
    backoff) before they are given up; `max_rows`: how many queued rows may be held meanwhile (beyond it, new
    rows are refused with WriteFailed, so the turns that already ran keep theirs)."""

    def __init__(self, engine: AsyncEngine, *, outage_seconds: float = 120.0, backoff: float = 0.1,
                 max_backoff: float = 2.0, max_rows: int = 100_000, linger: float = 0.025,
                 batch_rows: int = 500, reorderable: Sequence[Executable] = (),
                 folds: Sequence[FoldedUpdate] = (), committed: Committed | None = None) -> None:
        self.engine = engine
        self._committed = committed
        self.linger, self.batch_rows = linger, batch_rows
        # statement -> rank: within a run of these, rows go out grouped by rank (each keeps its own order)
        self._rank: dict[Executable, int] = {stmt: n for n, stmt in enumerate(reorderable)}
        self._folds: dict[Executable, FoldedUpdate] = {fold.update: fold for fold in folds}
        self._sync = _sqlite_writer(engine)
        postgres = engine.dialect.name == "postgresql"
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT") if postgres else None
        self._recordsets = Recordsets(engine.dialect)
        self._sql: dict[tuple[tuple[str, str | None, tuple[str, ...]], ...], str] = {}
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="yokebot-writer") if self._sync else None
        # SQLite file: the audit INSERTs, and the store's INSERT-if-new (`call`), straight through sqlite3
        self.sqlite_inserts = SqliteInserts() if self._sync else None
        self.outage_seconds = outage_seconds
        self.backoff, self.max_backoff = backoff, max_backoff
        self.max_rows = max_rows
        self.outage_since: float | None = None  # monotonic time the current outage began; None when healthy
        self._pending: list[Write] = []
        self._queued = 0  # sequence number of the last queued write
        self._done = 0  # sequence number of the last write committed (or given up on)
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []  # (target sequence number, future)
        self._failed: dict[str, str] = {}  # owner -> why some of its rows were refused
        self._wake = asyncio.Event()
        self._urgent = asyncio.Event()  # someone waits (a flush) or the batch is full: stop lingering
        self._task: asyncio.Task[None] | None = None
        # PostgreSQL: the server process the last batch was sent to, and when (monotonic) it was sent there
        self._backend: tuple[int, float] | None = None

    def _ensure_writer(self) -> None:
        """Start the writer task on the running loop (again, if it ended or a new loop took over)."""
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._wake, self._urgent = asyncio.Event(), asyncio.Event()
            self._task = loop.create_task(self._run(), name="yokebot-write-behind")
        self._wake.set()

    def put(self, statement: Executable, params: dict[str, Any], owner: str | None = None) -> None:
        if len(self._pending) >= self.max_rows:
            raise WriteFailed(f"the database has been unreachable for a while and {len(self._pending)} rows are "
                              "waiting for it already")
        self._pending.append((statement, params, owner))
        self._queued += 1
        self._ensure_writer()
        if len(self._pending) >= self.batch_rows:
            self._urgent.set()

    async def flush(self, owner: str | None = None) -> None:
        """Return once every write queued before this call is committed (or given up on); with an owner,
        raise WriteFailed if any of that owner's rows was refused."""
        target = self._queued
        if self._done < target:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append((target, future))
            self._ensure_writer()
            self._urgent.set()
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
            if not self._urgent.is_set() and self.linger > 0:  # let the rows of the next moments join
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._urgent.wait(), self.linger)
            self._wake.clear()
            self._urgent.clear()
            while self._pending:
                batch, self._pending = self._pending, []
                failed = await self._commit_retrying(batch)
                if failed is not None and transient(failed):  # an outage longer than outage_seconds
                    self._give_up(batch, _first_line(failed))
                elif failed is not None:
                    log.warning("a batch of %d rows was refused (%s); committing them one by one", len(batch),
                                _first_line(failed))
                    await self._commit_one_by_one(batch)
                self._done += len(batch)
                self._release()

    async def _commit(self, batch: list[Write]) -> None:
        if self._thread is not None:
            await asyncio.get_running_loop().run_in_executor(self._thread, self._commit_sync, batch)
            return
        self._backend = None
        one = self._one_statement(batch) if self._autocommit is not None else None
        if one is not None:
            assert self._autocommit is not None
            await run_raw(self._autocommit, *one, seen=self._seen)
            return
        postgres = self._autocommit is not None  # else SQLite in memory: its one connection is the database
        async with self.engine.connect() as conn:
            if postgres:
                self._seen(conn, (await conn.get_raw_connection()).driver_connection)
            try:
                await conn.run_sync(self._transaction, batch)  # the whole transaction in one greenlet
            except Exception:
                if postgres:  # its server process is ended before a retry asks what it committed
                    await conn.invalidate()
                raise

    def _seen(self, conn: AsyncConnection, driver: Any) -> None:
        """PostgreSQL: note the server process of the connection a batch goes out on (asyncpg knows it from
        the connection's start, or the connection asked at connect behind a session pooler; no round trip)."""
        self._backend = (server_pid(conn, driver), time.monotonic())

    def _one_statement(self, batch: list[Write]) -> tuple[str, ...] | None:
        """PostgreSQL: a batch of plain audit INSERTs and turn-finishing UPDATEs (the common case) as one
        statement, one round trip instead of BEGIN, an executemany per run of a table and COMMIT (six for a
        fast turn, more in a busy batch): each table's rows go in as one JSON array parameter
        (`json_to_recordset`), in their order, each table in a data-modifying CTE; one statement is one
        transaction. The UPDATEs may leave their place between the INSERTs: each touches a row of an earlier
        batch (one of this batch is folded into its INSERT) that nothing in the batch reads, and two of one
        row are merged in their order. None: some write is of another kind, a table's rows differ in their
        columns, or a value is not plain JSON; the batch then goes the usual way."""
        inserts: dict[Executable, list[dict[str, Any]]] = {}
        updates: dict[Executable, dict[Any, dict[str, Any]]] = {}
        for statement, params, _owner in _folded(batch, self._folds):
            fold = self._folds.get(statement)
            if fold is not None:
                rows = updates.setdefault(statement, {})
                key = params.get(fold.param)
                rows[key] = rows.get(key, {}) | params
            elif statement in self._rank:
                inserts.setdefault(statement, []).append(params)
            else:
                return None
        groups: list[tuple[Table, FoldedUpdate | None, list[dict[str, Any]]]] = []
        tables: set[str] = set()
        for statement, rows in inserts.items():
            table = _table(statement)
            if table is None or table.name in tables or len({tuple(r) for r in rows}) != 1:
                return None  # a table in two CTEs: the order of its rows' ids between them would be unspecified
            tables.add(table.name)
            groups.append((table, None, with_defaults(table, rows)))
        for statement, merged in updates.items():
            table, fold = _table(statement), self._folds[statement]
            if table is None:
                return None
            by_columns: dict[tuple[str, ...], list[dict[str, Any]]] = {}
            for row in merged.values():  # each row once: CTEs on different rows need no order
                row = {fold.column: row[fold.param], **{k: v for k, v in row.items() if k != fold.param}}
                by_columns.setdefault(tuple(row), []).append(row)
            groups += [(table, fold, rows) for rows in by_columns.values()]
        args: list[str] = []
        for table, _fold, rows in groups:
            if any(key not in table.columns for key in rows[0]):
                return None  # names in the SQL are the table's own columns, never anything else
            try:
                args.append(self._recordsets.rows_json(table, rows))
            except (TypeError, ValueError):
                return None
        shape = tuple((table.name, fold.column if fold is not None else None, tuple(rows[0]))
                      for table, fold, rows in groups)
        sql = self._sql.get(shape)
        if sql is None:  # a batch of this shape is new: its text is made once (a turn's batches have few shapes)
            sql = self._sql_for(groups)
            if sql is None:
                return None
            if len(self._sql) >= SQL_SHAPES:
                self._sql.clear()
            self._sql[shape] = sql
        return (sql, *args)

    def _sql_for(self, groups: list[tuple[Table, FoldedUpdate | None, list[dict[str, Any]]]]) -> str | None:
        """The statement's text for these groups (the n-th group's rows are parameter $n)."""
        parts: list[str] = []
        quote = self._recordsets.quote
        for index, (table, fold, rows) in enumerate(groups, start=1):
            if fold is None:
                parts.append(f"w{len(parts)} AS ({self._recordsets.insert(table, list(rows[0]), index)})")
                continue
            source, value = self._recordsets.source(table, list(rows[0]), index)
            key = quote(fold.column)
            sets = ", ".join(f"{quote(c)} = {v}" for c, v in value.items() if c != fold.column)
            parts.append(f"w{len(parts)} AS (UPDATE {quote(table.name)} AS t SET {sets} FROM {source} "  # noqa: S608
                         f"WHERE t.{key} = x.{key})")
        if not parts:
            return None
        return "WITH " + ", ".join(parts) + " SELECT 1"

    def _transaction(self, conn: Connection, batch: list[Write]) -> None:
        with conn.begin():
            raw = self.sqlite_inserts  # only with the writer's own thread, where this runs
            for statement, group in _runs(_folded(batch, self._folds), self._rank):
                if raw is None or statement not in self._rank or not raw.run(conn, statement, group):
                    conn.execute(statement, group)  # executemany

    async def _commit_retrying(self, batch: list[Write]) -> Exception | None:
        """Commit the batch in one transaction; None once it is in. A database that is away (stopping,
        restarting, network gone, SQLite file locked or unwritable) is waited out, with backoff, for up to
        `outage_seconds`: the rows stay queued in memory meanwhile. Returned: the error of a refused row, or the
        last one of an outage longer than that (a transient one)."""
        retrying = AsyncRetrying(
            retry=retry_if_exception(transient), reraise=True,
            wait=wait_exponential(multiplier=self.backoff, max=self.max_backoff),
            stop=stop_after_delay(self.outage_seconds),
            before_sleep=lambda state: self._outage(state, len(batch)),
        )
        try:
            try:
                await self._commit(batch)  # the common case, without building the retry machinery
            except Exception as exc:
                if not transient(exc):
                    raise
                self._outage_from(exc, len(batch))
                async for attempt in retrying:
                    with attempt:
                        if await self._already_committed(batch):
                            log.warning("the database had committed a batch of %d rows before the connection "
                                        "was lost; it is not written again", len(batch))
                            break
                        await self._commit(batch)
        except Exception as exc:
            self._recovered(len(batch), "given up" if transient(exc) else "refused")
            return exc
        self._recovered(len(batch), "written")
        return None

    async def _already_committed(self, batch: list[Write]) -> bool:
        probe = self._committed
        if probe is None:
            return False
        if self._thread is not None and self._sync is not None:
            sync = self._sync

            def run() -> bool:
                with sync.connect() as conn:
                    return probe(conn, batch)

            return await asyncio.get_running_loop().run_in_executor(self._thread, run)
        async with self.engine.connect() as conn:
            if self._backend is not None:
                pid, sent = self._backend
                await _end_backend(conn, pid, time.monotonic() - sent)
            return await conn.run_sync(probe, batch)

    def _outage(self, state: RetryCallState, rows: int) -> None:
        self._outage_from(state.outcome.exception() if state.outcome else None, rows)

    def _outage_from(self, exc: BaseException | None, rows: int) -> None:
        if self.outage_since is not None:
            return
        self.outage_since = time.monotonic()
        turns = len({w[2] for w in self._pending} | {None}) - 1
        log.warning("the database is unavailable (%s): holding %d rows (and %d queued behind them, of %d turns) "
                    "in memory, retrying for up to %.0f s (YOKEBOT_DB_OUTAGE_SECONDS)",
                    _first_line(exc) if exc else "?", rows, len(self._pending), turns, self.outage_seconds)

    def _recovered(self, rows: int, outcome: Literal["written", "refused", "given up"]) -> None:
        if self.outage_since is None:
            return
        waited = time.monotonic() - self.outage_since
        self.outage_since = None
        if outcome == "written":
            log.warning("the database is back after %.1f s: the %d rows held meanwhile are written", waited, rows)
        elif outcome == "refused":
            log.warning("the database is back after %.1f s", waited)
        else:
            log.error("the database stayed unavailable for %.1f s: giving up on %d held rows", waited, rows)

    async def _commit_one_by_one(self, batch: list[Write]) -> None:
        """One refused row must not take the other turns' rows with it: each row alone, failures noted. Each
        goes the way a batch does: an outage met meanwhile (the server stopping right after the refusal) is
        waited out, not taken for more refused rows; one longer than outage_seconds gives up the rest."""
        for at, write in enumerate(batch):
            failed = await self._commit_retrying([write])
            if failed is None:
                continue
            reason = _first_line(failed)
            if transient(failed):
                self._give_up(batch[at:], reason)
                return
            log.error("a %s row of turn %s was refused by the database: %s",
                      getattr(write[0], "table", "?"), write[2], reason)
            if write[2] is not None:
                self._failed.setdefault(write[2], reason)

    def _give_up(self, writes: Sequence[Write], reason: str) -> None:
        """The database stayed away longer than outage_seconds: these rows are dropped, their turns told."""
        for _statement, _params, owner in writes:
            if owner is not None:
                self._failed.setdefault(owner, f"the database was unreachable for over {self.outage_seconds:.0f} s: "
                                               f"{reason}")

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
        with self._sync.connect() as conn:
            self._transaction(conn, batch)

    def _release(self) -> None:
        still: list[tuple[int, asyncio.Future[None]]] = []
        for target, future in self._waiters:
            if target > self._done:
                still.append((target, future))
            elif not future.done():
                future.set_result(None)
        self._waiters = still


async def _end_backend(conn: AsyncConnection, pid: int, age: float) -> None:
    """End the server process a lost batch went out on `age` seconds ago, and wait until it has exited, before
    asking what it committed. Until then the answer can change: a COMMIT (or the one autocommit statement) that
    reached the server may still be running there, or still be unread in its socket, when another connection
    asks; and a transaction whose COMMIT never arrived stays open, its rows' keys locked, until the server
    notices the client is gone (minutes, over a dead network). Once the process is gone, its transaction is
    either committed or rolled back for good. Only a process of this same database user is ended (the server
    would refuse others), and only one that was there when the batch went out: after a server restart (or once
    the process has exited) its pid is free, and a process that has it now (another of our connections: the
    thread locks', a turn's read) has nothing of the batch. One that does not end within 5 s is a transient
    error, retried with the outage's backoff."""
    found = await conn.execute(text(
        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
        "WHERE pid = :pid AND usename = current_user AND pid <> pg_backend_pid() "
        "AND backend_start < clock_timestamp() - make_interval(secs => :age) "
        "AND pg_postmaster_start_time() < clock_timestamp() - make_interval(secs => :age)"),
        {"pid": pid, "age": age})
    ended = found.scalar()
    await conn.commit()
    if ended is False:
        raise OSError(f"the server process {pid} of a lost connection has not ended yet")


def _first_line(exc: BaseException) -> str:
    """The driver's message without the SQL and parameters SQLAlchemy appends (they may hold user text)."""
    orig = getattr(exc, "orig", None) or exc
    first = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
    return cut(first, 300)[0]  # redacted before it is cut: this text is stored and logged


def _folded(batch: list[Write], folds: dict[Executable, FoldedUpdate]) -> list[Write]:
    """The batch with each foldable UPDATE merged into its row's INSERT earlier in the batch (if there is one)."""
    if not folds:
        return batch
    inserts = {fold.insert: fold.column for fold in folds.values()}
    out: list[Write] = []
    rows: dict[tuple[Executable, Any], int] = {}  # (insert statement, key) -> position in `out`
    for write in batch:
        statement, params, _owner = write
        fold = folds.get(statement)
        if fold is not None and (at := rows.get((fold.insert, params.get(fold.param)))) is not None:
            insert, values, first_owner = out[at]
            out[at] = (insert, values | {k: v for k, v in params.items() if k != fold.param}, first_owner)
            continue
        column = inserts.get(statement)
        if column is not None:
            rows[(statement, params.get(column))] = len(out)
        out.append(write)
    return out


def _table(statement: Executable) -> Table | None:
    table: Any = getattr(statement, "table", None)
    return cast(Table, table) if isinstance(table, Table) else None


def _runs(batch: list[Write], rank: dict[Executable, int]) -> Iterable[tuple[Executable, list[dict[str, Any]]]]:
    """The batch as executemany groups. A run of reorderable writes (between two others) is sorted by
    statement rank, stably: each table's rows keep their order (and so their ids' order), and no other
    statement moves past them. Then consecutive writes of the same statement and columns are one group."""
    ordered: list[Write] = []
    run: list[Write] = []
    for write in batch:
        if write[0] in rank:
            run.append(write)
            continue
        if run:
            ordered += sorted(run, key=lambda w: rank[w[0]])
            run = []
        ordered.append(write)
    if run:
        ordered += sorted(run, key=lambda w: rank[w[0]])
    for (statement, _keys), items in groupby(ordered, key=lambda w: (w[0], tuple(w[1]))):
        yield statement, [params for _, params, _ in items]
