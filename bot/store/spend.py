"""The spend caps' side of the database (the engine's `SpendLedger` port; bot/engine/run/spend.py):

- `spent`: a scope's tokens by model since the UTC day (and month) began, from `llm_calls` (joined to `sessions`
  for a channel's), after the write-behind queue has committed what was queued: this process's own calls are in.
- `take` / `release`: a scope's slot, which a turn near a cap holds while it runs, so that of turns reaching a
  cap together on several instances at most one goes through. PostgreSQL: a session advisory lock, on a
  connection of its own to the direct URL (YOKEBOT_DATABASE_DIRECT_URL behind a transaction pooler; the lock is
  the connection's: it goes with a dead process); SQLite: a POSIX lock on
  one byte of `<database>.spend.lock` chosen by the scope (the kernel drops it with the process, kill -9
  included). In one process the caps themselves let one turn per scope hold it.
- `first`: the first refusal of a period, claimed once among every instance (a `processed_events` row)."""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
from datetime import datetime
from pathlib import Path
from typing import IO, Any, cast

from sqlalchemy import Select, Table, and_, bindparam, case, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.engine.ports import ModelSpend, SpendScope
from bot.store.db import create_engine
from bot.store.filelock import sqlite_file
from bot.store.models import LLMCallRow, SessionRow
from bot.store.repositories import SqlStore

L, S = cast(Table, LLMCallRow.__table__), cast(Table, SessionRow.__table__)
CLAIMS = "spend"  # the `processed_events.platform` of the notices' claims
_TRY = "SELECT pg_try_advisory_lock($1)"
_UNLOCK = "SELECT pg_advisory_unlock($1)"


def lock_key(scope: SpendScope) -> int:
    """A signed 64-bit key for the scope (advisory locks take a bigint; byte offsets use its low 31 bits)."""
    return int.from_bytes(hashlib.blake2b(f"yokebot-spend:{scope.key}".encode(), digest_size=8).digest(),
                          "big", signed=True)


def spent_query(scope: SpendScope, monthly: bool) -> Select[Any, Any, Any, Any, Any, Any, Any]:
    """Tokens by model since `:since` (`:day` for today's), the largest call's, for the scope; one shape per kind
    of scope (the parameters change, the statement does not)."""
    return _spent(scope, monthly, by_channel=False)


def _spent(scope: SpendScope, monthly: bool, *, by_channel: bool) -> Any:
    day = L.c.created_at >= bindparam("day")

    def today(column: Any) -> Any:
        return func.sum(case((day, column), else_=0)) if monthly else func.sum(column)

    query = select(L.c.model, today(L.c.prompt_tokens), today(L.c.completion_tokens),
                   func.sum(L.c.prompt_tokens), func.sum(L.c.completion_tokens),
                   func.max(L.c.prompt_tokens), func.max(L.c.completion_tokens))
    where = [L.c.created_at >= bindparam("since")]
    if scope.agent is not None:
        where.append(L.c.agent == bindparam("agent"))
    if scope.channel is not None or by_channel:
        query = query.join(S, S.c.id == L.c.session_id)
    if scope.channel is not None:
        where += [S.c.platform == bindparam("platform"), S.c.channel == bindparam("channel")]
    if by_channel:
        query = query.add_columns(S.c.platform, S.c.channel).group_by(S.c.platform, S.c.channel)
    return query.where(and_(*where)).group_by(L.c.model)


def _params(scope: SpendScope, day: datetime, month: datetime | None) -> dict[str, Any]:
    params = {"since": month or day, "day": day, "agent": scope.agent, "platform": scope.platform,
              "channel": scope.channel}
    return {k: v for k, v in params.items() if v is not None}


def _model_spend(r: Any) -> ModelSpend:
    return ModelSpend(str(r[0]), int(r[1] or 0), int(r[2] or 0), int(r[3] or 0), int(r[4] or 0), int(r[5] or 0),
                      int(r[6] or 0))


async def spent_by_channel(conn: AsyncConnection, scope: SpendScope, day: datetime, month: datetime | None
                           ) -> dict[tuple[str, str], list[ModelSpend]]:
    """An agent's calls since `day` (and `month`), by channel and model (`yokebot usage`: caps per channel)."""
    out: dict[tuple[str, str], list[ModelSpend]] = {}
    for r in await conn.execute(_spent(scope, month is not None, by_channel=True), _params(scope, day, month)):
        row: tuple[Any, ...] = tuple(r)
        out.setdefault((str(row[7]), str(row[8])), []).append(_model_spend(row))
    return out


async def spent_in(conn: AsyncConnection, scope: SpendScope, day: datetime, month: datetime | None
                   ) -> list[ModelSpend]:
    """`SqlSpendLedger.spent` on a connection of the caller's (`yokebot usage` reads without a store)."""
    return [_model_spend(r) for r in await conn.execute(spent_query(scope, month is not None),
                                                         _params(scope, day, month))]


class SqlSpendLedger:
    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self._queries: dict[tuple[bool, bool, bool], Select[Any, Any, Any, Any, Any, Any, Any]] = {}
        url = store.direct.url.render_as_string(hide_password=False)  # session-scoped locks: never via a pooler
        self._slots: _PgSlots | _FileSlots = (_PgSlots(url) if store.engine.dialect.name == "postgresql"
                                             else _FileSlots(sqlite_file(url)))

    async def spent(self, scope: SpendScope, day: datetime, month: datetime | None) -> list[ModelSpend]:
        await self.store.flush()  # this process's calls queued so far are in what is read
        shape = (scope.agent is not None, scope.channel is not None, month is not None)
        query = self._queries.get(shape)
        if query is None:
            query = self._queries[shape] = spent_query(scope, month is not None)
        return [_model_spend(r) for r in await self.store.rows(query, _params(scope, day, month))]

    async def take(self, scope: SpendScope) -> bool:
        return await self._slots.take(lock_key(scope))

    async def release(self, scope: SpendScope) -> None:
        await self._slots.release(lock_key(scope))

    async def first(self, claim: str) -> bool:
        if len(claim) > 255:
            claim = claim[:190] + "#" + hashlib.sha256(claim.encode()).hexdigest()
        return await self.store.claim_event(CLAIMS, claim)

    async def close(self) -> None:
        await self._slots.close()


class _PgSlots:
    """Session advisory locks on one connection of their own, one statement at a time (the slots are rare: only
    turns starting near a cap ask). A take whose turn was cancelled meanwhile lets go of what it got."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._engine: AsyncEngine | None = None
        self._conn: AsyncConnection | None = None
        self._io = asyncio.Lock()
        self._pending: set[asyncio.Task[Any]] = set()

    async def _ask(self, sql: str, key: int) -> bool:
        async with self._io:
            if self._engine is None:
                self._engine = create_engine(self.url, pool_size=1, max_overflow=0, isolation_level="AUTOCOMMIT")
            if self._conn is None:
                self._conn = await self._engine.connect()
            driver: Any = (await self._conn.get_raw_connection()).driver_connection
            try:
                return bool(await driver.fetchval(sql, key))
            except Exception:  # the connection is broken: its locks are gone with it; a new one next time
                await self._drop()
                raise

    async def take(self, key: int) -> bool:
        task = asyncio.ensure_future(self._ask(_TRY, key))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(lambda done: self._let_go(done, key))
            raise

    def _let_go(self, done: asyncio.Task[bool], key: int) -> None:
        if not done.cancelled() and done.exception() is None and done.result():
            later = asyncio.ensure_future(self.release(key))
            self._pending.add(later)
            later.add_done_callback(self._pending.discard)

    async def release(self, key: int) -> None:
        await asyncio.shield(self._ask(_UNLOCK, key))

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.invalidate()
                await conn.close()
            except Exception:  # noqa: S110 - it is broken already; the server drops its locks
                pass

    async def close(self) -> None:
        async with self._io:
            await self._drop()
            if self._engine is not None:
                await self._engine.dispose()
                self._engine = None


class _FileSlots:
    """POSIX locks on one byte each of `<database>.spend.lock` (an in-memory database: this process is alone,
    and the caps' own flag is the slot)."""

    def __init__(self, database: Path | None) -> None:
        self.path = None if database is None else database.with_name(database.name + ".spend.lock")
        self._file: IO[bytes] | None = None

    def _lock(self, key: int, op: int) -> bool:
        if self.path is None:
            return True
        if self._file is None:  # kept open: closing any descriptor of the file drops this process's locks on it
            self._file = open(self.path, "a+b")
        try:
            fcntl.lockf(self._file.fileno(), op, 1, key & 0x7FFFFFFF, os.SEEK_SET)
        except (BlockingIOError, PermissionError):
            return False
        return True

    async def take(self, key: int) -> bool:
        return await asyncio.to_thread(self._lock, key, fcntl.LOCK_EX | fcntl.LOCK_NB)

    async def release(self, key: int) -> None:
        await asyncio.to_thread(self._lock, key, fcntl.LOCK_UN)

    async def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
