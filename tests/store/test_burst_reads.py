"""A burst of turns at once (200 mentions, an alert storm in one channel) opens its sessions with few INSERTs
and reads a channel's memories with few queries (bench/concurrency.py: PostgreSQL went from 2.1x to 1.3x the
ideal), without giving a turn a wrong session or a memory list older than what it must see."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, event, text

from bot.store.memory import SqlMemory
from bot.store.repositories import SqlStore


@pytest.fixture
def seen() -> Iterator[Counter[str]]:
    """The statements sent to the database, by their first three words, by any engine of this process (on
    SQLite the store's hot queries run on its writer thread's own engine, some straight through sqlite3, so
    there they are what the sqlite3 connections opened meanwhile traced; elsewhere what SQLAlchemy sent)."""
    counts: Counter[str] = Counter()

    def count(statement: str) -> None:
        counts[" ".join(statement.split()[:3])] += 1

    def before(conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if conn.dialect.name != "sqlite":
            count(statement)

    def connect(dbapi_conn: Any, _record: Any) -> None:
        if isinstance(dbapi_conn, sqlite3.Connection):
            dbapi_conn.set_trace_callback(count)

    event.listen(Engine, "before_cursor_execute", before)
    event.listen(Engine, "connect", connect)
    yield counts
    event.remove(Engine, "before_cursor_execute", before)
    event.remove(Engine, "connect", connect)


async def session_inserts(engine: Any, seen: Counter[str]) -> int:
    """How many statements stored the sessions. PostgreSQL: by the transactions that wrote them (`xmin`; each
    INSERT there is a transaction of its own, sent straight through the driver where SQLAlchemy does not see it)."""
    if engine.dialect.name != "postgresql":
        return seen["INSERT INTO sessions"]
    async with engine.connect() as conn:
        return int((await conn.execute(text("SELECT count(DISTINCT xmin::text) FROM sessions"))).scalar_one())


async def test_a_burst_of_new_threads_gets_one_session_each_in_few_inserts(engine, seen: Counter[str]):
    store = SqlStore(engine)
    seen.clear()
    threads = [f"t{i}" for i in range(60)]
    # thread t0 is asked for three times at once (e.g. a retry of its first message racing the first)
    asks = [*threads, "t0", "t0"]
    opened = await asyncio.gather(*(store.session_for("slack", "C1", t, "ops") for t in asks))
    by_thread: dict[str, set[str]] = {}
    for thread, session in zip(asks, opened, strict=True):
        assert (session.platform, session.channel, session.thread, session.agent) == ("slack", "C1", thread, "ops")
        by_thread.setdefault(thread, set()).add(session.id)
    assert all(len(ids) == 1 for ids in by_thread.values())  # one session per thread, whoever asked
    assert len({next(iter(ids)) for ids in by_thread.values()}) == 60
    assert [s.created for s in opened].count(True) == 60  # t0 made once: the other two find it
    assert 1 <= await session_inserts(engine, seen) <= 5, seen  # 60 sessions, not one INSERT each

    again = SqlStore(engine)  # another instance (or after a restart): the threads have their sessions
    reopened = await asyncio.gather(*(again.session_for("slack", "C1", t, "ops") for t in threads))
    assert [s.id for s in reopened] == [next(iter(by_thread[t])) for t in threads]
    assert not any(s.created for s in reopened)
    async with engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM sessions"))).scalar() == 60
    await store.close()
    await again.close()


async def test_a_burst_in_one_channel_reads_its_memories_once(
        engine, seen: Counter[str]):
    store = SqlStore(engine)
    await store.memory.remember("ops", "C1", "the db is on port 5433", None)
    seen.clear()
    recalled = await asyncio.gather(*(store.memory.recall("ops", "C1", "", 20) for _ in range(50)))
    assert all([m.content for m in r] == ["the db is on port 5433"] for r in recalled)
    assert seen["SELECT * FROM"] <= 3, seen  # 50 recalls, not 50 queries
    recalled[0].clear()  # each caller has its own list
    assert [m.content for m in await store.memory.recall("ops", "C1", "", 20)] == ["the db is on port 5433"]
    await store.close()


class HeldRecalls(SqlMemory):
    """Memory whose reads, once they have run, wait for the test before they answer: the interleaving of a real
    burst (a read that began before a fact was stored, still in flight after it), made certain."""

    def __init__(self, store: SqlStore) -> None:
        super().__init__(store)
        self.answer = asyncio.Event()
        self.answer.set()

    async def search(self, *args: Any) -> Any:
        items = await super().search(*args)
        await self.answer.wait()
        return items


@pytest.mark.parametrize("change", ["remember", "forget"])
async def test_a_recall_asked_after_a_fact_changed_does_not_share_a_read_from_before(
        engine, seen: Counter[str], change: str):
    sql = SqlStore(engine)
    store = HeldRecalls(sql)
    old = await store.remember("ops", "C1", "the db is on port 5433", None)
    assert old is not None
    store.answer.clear()
    seen.clear()
    before = asyncio.create_task(store.recall("ops", "C1", "", 20))  # another turn's read, in flight
    while not seen["SELECT * FROM"]:
        await asyncio.sleep(0.005)
    if change == "remember":  # this turn stores a fact, and its next read (or anyone's after) must have it
        assert await store.remember("ops", "C1", "on-call is alice", None) is not None
    else:
        assert await store.forget("ops", old.id)
    after = asyncio.create_task(store.recall("ops", "C1", "", 20))
    await asyncio.sleep(0.05)
    store.answer.set()
    expected = ["on-call is alice", "the db is on port 5433"] if change == "remember" else []  # newest first
    assert [m.content for m in await after] == expected
    assert [m.content for m in await before] == ["the db is on port 5433"]  # it began before: it may not
    await sql.close()


async def test_a_recall_whose_caller_is_cancelled_still_answers_the_others(engine):
    store = SqlStore(engine)
    await store.memory.remember("ops", None, "on-call is alice", None)
    first = asyncio.create_task(store.memory.recall("ops", None, "", 5))
    second = asyncio.create_task(store.memory.recall("ops", None, "", 5))
    await asyncio.sleep(0)
    first.cancel()
    assert [m.content for m in await second] == ["on-call is alice"]
    with pytest.raises(asyncio.CancelledError):
        await first
    await store.close()
