"""The `notify_ledger` table: every alert notify sends (target channel, content hash, time), read by every
instance sharing the database, so the per-channel limit and the dedup window hold across instances (the
engine's `NotifyLedger` port).

A claim is one transaction: the new row is inserted first, then the history is read (the row itself left
out), and the transaction commits only when notify allows the alert. On PostgreSQL a transaction advisory lock
on the target comes first, so two instances sending to one channel check one after the other; on SQLite the
INSERT takes the database's single write lock, held until the commit, which does the same. In one process a
lock per target keeps the process's own claims in line without waiting on the database."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import cast

from sqlalchemy import Table, and_, func, insert, select, update
from sqlalchemy import text as sql_text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.engine.ports import AlertHistory, AlertKey
from bot.store.models import NotifyLedgerRow, utcnow

N = cast(Table, NotifyLedgerRow.__table__)
PER_MINUTE = timedelta(seconds=60)  # the window of `max_per_channel_per_minute`


def _utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; every time here is UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class SqlNotifyLedger:
    """`NotifyLedger` on the `notify_ledger` table. `clock`: the current UTC time (tests move it)."""

    def __init__(self, engine: AsyncEngine, clock: Callable[[], datetime] = utcnow) -> None:
        self.engine, self.clock = engine, clock
        self._locks: dict[str, asyncio.Lock] = {}

    async def claim(self, key: AlertKey, window: float,
                    allow: Callable[[AlertHistory], bool]) -> tuple[AlertHistory, int | None]:
        now = self.clock()
        lock_key = f"notify:{key.target}"
        async with self._locks.setdefault(lock_key, asyncio.Lock()), self.engine.connect() as conn:
            tx = await conn.begin()
            try:
                if self.engine.dialect.name == "postgresql":
                    await conn.execute(sql_text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": lock_key})
                entry = (await conn.execute(insert(N).values(
                    agent=key.agent, target=key.target, digest=key.digest, turn_id=key.turn_id, reply=key.reply,
                    state="posting", sent_at=now).returning(N.c.id))).scalar_one()
                history = await self._history(conn, key, window, now, int(entry))
                if not allow(history):
                    await tx.rollback()
                    return history, None
                await tx.commit()
            except BaseException:
                if tx.is_active:
                    await tx.rollback()
                raise
        return history, int(entry)

    async def _history(self, conn: AsyncConnection, key: AlertKey, window: float, now: datetime,
                       entry: int) -> AlertHistory:
        others = N.c.id != entry
        same_ago: float | None = None
        same_ref: str | None = None
        if window > 0:
            same = (await conn.execute(
                select(N.c.sent_at, N.c.ref, N.c.state)
                .where(others, N.c.agent == key.agent, N.c.target == key.target, N.c.digest == key.digest,
                       N.c.state != "failed", N.c.sent_at > now - timedelta(seconds=window))
                .order_by(N.c.sent_at.desc()).limit(1))).first()
            if same is not None:
                same_ago = max(0.0, (now - _utc(same.sent_at)).total_seconds())
                same_ref = same.ref if same.state == "posted" else None  # None: still being posted
        in_turn = and_(others, N.c.turn_id == key.turn_id)
        counts = (await conn.execute(select(
            select(func.count()).select_from(N).where(in_turn, N.c.reply == key.reply).scalar_subquery(),
            select(func.count()).select_from(N).where(in_turn).scalar_subquery(),
            select(func.count()).select_from(N)
            .where(others, N.c.target == key.target, N.c.sent_at > now - PER_MINUTE).scalar_subquery(),
        ))).one()
        return AlertHistory(same_ago, same_ref, int(counts[0]), int(counts[1]), int(counts[2]))

    async def posted(self, entry: int, ref: str) -> None:
        await self._set(entry, state="posted", ref=ref[:255])

    async def failed(self, entry: int) -> None:
        await self._set(entry, state="failed")

    async def _set(self, entry: int, **values: object) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(update(N).where(N.c.id == entry).values(**values))
