"""Exactly-once claims, grouped into few transactions: every key wins exactly once, across bursts,
duplicates inside one burst, stores sharing a database (two instances), and restarts."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

from sqlalchemy import Engine, event, text

from bot.store.repositories import SqlStore
from tests.conftest import db_url_via_pgbouncer as db_url  # noqa: F401  (direct, and through PgBouncer)


async def test_a_burst_with_duplicates_claims_each_key_once(engine):
    first, second = SqlStore(engine), SqlStore(engine)  # two instances on one database
    keys = [("slack-message", f"C1:{i}") for i in range(100)]
    deliveries = [(store, key) for key in keys for store in (first, second, first)]
    won = await asyncio.gather(*(store.claim_event(*key) for store, key in deliveries))
    winners = [key for (_, key), ok in zip(deliveries, won, strict=True) if ok]
    assert sorted(winners) == sorted(keys)
    # a redelivery later (or after a restart: a fresh store) is a duplicate
    restarted = SqlStore(engine)
    assert await restarted.claim_event("slack-message", "C1:7") is False
    assert await restarted.claim_event("discord", "C1:7") is True  # keys are per platform
    async with engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM processed_events"))).scalar() == 101
    for s in (first, second, restarted):
        await s.close()


async def test_a_database_error_reaches_every_waiting_claim(engine):
    store = SqlStore(engine)
    async with engine.begin() as conn:
        await conn.execute(text("DROP TABLE processed_events"))
    results = await asyncio.gather(*(store.claim_event("slack", str(i)) for i in range(5)), return_exceptions=True)
    assert all(isinstance(r, Exception) for r in results)
    await store.close()


async def test_a_storm_larger_than_one_statement_claims_each_key_once(engine):
    """1,200 deliveries of 1,100 keys at once: more rows than one INSERT takes on SQLite (it goes in several
    statements of one transaction; here with a SQLite library that allows only 999 variables per statement, as
    before 3.32), each key won once, and a redelivery afterwards is a duplicate."""

    def old_limit(dbapi_conn: Any, _record: Any) -> None:
        if isinstance(dbapi_conn, sqlite3.Connection):
            dbapi_conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)

    event.listen(Engine, "connect", old_limit)
    store = SqlStore(engine)
    try:
        keys = [("slack-message", f"C1:{i}") for i in range(1100)]
        deliveries = keys + keys[:100]  # the first goes alone; the others wait for it and go in one batch
        won = await asyncio.gather(*(store.claim_event(*key) for key in deliveries))
        assert sorted(key for key, ok in zip(deliveries, won, strict=True) if ok) == sorted(keys)
        assert await store.claim_event("slack-message", "C1:1099") is False
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT count(*) FROM processed_events"))).scalar() == 1100
    finally:
        event.remove(Engine, "connect", old_limit)
        await store.close()
