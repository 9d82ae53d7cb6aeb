"""Issue 37.7, each phase of a real PostgreSQL stop and start met by the write-behind queue, on a private cluster
(tests/fakes/pg_cluster.py): a server shutting down that refuses new connections ("the database system is
shutting down", SQLSTATE 57P03), and a fast stop that ends the session a batch is committing on ("terminating
connection due to administrator command", 57P01). Through SQLAlchemy both arrive as a plain DBAPIError; the
writer took them for a refused row, committed the batch row by row on the stopped server, and the turn's
rows were lost (its flush raised WriteFailed: the user got an apology). Now they are an outage: the rows are
held, then written once. Both ways a batch is sent are covered: one statement (audit rows alone) and a
transaction (a batch with a summary in it)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.pool import NullPool

from bot.engine.messages import Message
from bot.store.db import create_engine, ensure_schema
from bot.store.repositories import SqlStore
from bot.store.session_lock import PgSessionLock
from bot.store.writer import WriteFailed
from tests.fakes.pg_cluster import PgCluster
from tests.helpers import eventually

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
PATHS = ["one statement", "transaction"]


@pytest.fixture
async def store(cluster: PgCluster) -> AsyncIterator[SqlStore]:
    # no pool: each batch opens its connection, as after a restart, when every pooled one is gone
    engine = create_engine(cluster.url, poolclass=NullPool)
    await ensure_schema(engine)
    s = SqlStore(engine)
    yield s
    await s.close()
    await engine.dispose()


def _dsn(cluster: PgCluster) -> str:
    return cluster.url.replace("postgresql+asyncpg", "postgresql")


async def _first_turn(store: SqlStore) -> str:
    """The thread's session and first turn, written while the server is up: the batch of the next turn is then
    its audit rows alone (one statement), unless a summary joins it (a transaction)."""
    session = await store.session_for("slack", "C1", "th", "ops")
    await store.start_turn(session.id, "turn-0", "mention", "U1", "earlier")
    await store.flush("turn-0")
    return session.id


async def _queue_turn(store: SqlStore, session_id: str, path: str) -> None:
    await store.start_turn(session_id, "turn-1", "mention", "U1", "hello")
    await store.append(session_id, "turn-1", Message.user("hello"))
    await store.append(session_id, "turn-1", Message.assistant("hi"))
    if path == "transaction":
        await store.save_summary(session_id, "turn-1", "turn-0", "the earlier turn", 1)


async def _counts(store: SqlStore) -> tuple[int, int, int]:
    async with store.engine.connect() as conn:
        turns = (await conn.execute(text("SELECT count(*) FROM turns WHERE id = 'turn-1'"))).scalar_one()
        messages = (await conn.execute(text("SELECT count(*) FROM messages WHERE turn_id = 'turn-1'"))).scalar_one()
        summaries = (await conn.execute(text("SELECT count(*) FROM summaries"))).scalar_one()
    return turns, messages, summaries


@pytest.mark.parametrize("path", PATHS)
async def test_a_server_shutting_down_is_waited_out_not_taken_for_a_refused_row(
        cluster: PgCluster, store: SqlStore, path: str, caplog: pytest.LogCaptureFixture):
    session_id = await _first_turn(store)
    holder = await asyncpg.connect(_dsn(cluster))  # a smart shutdown waits for this session to end
    try:
        await asyncio.to_thread(cluster.stop, "smart", wait=False)
        await eventually(lambda: _refuses(cluster), 20, "the server refusing new connections")
        with caplog.at_level(logging.WARNING, logger="bot.store.writer"):
            await _queue_turn(store, session_id, path)
            flushed = asyncio.create_task(store.flush("turn-1"))
            await asyncio.sleep(1.5)
            assert not flushed.done()  # held: the server is shutting down, not refusing the rows
    finally:
        await holder.close()
    await asyncio.to_thread(cluster.wait_stopped)
    await asyncio.to_thread(cluster.start)
    await asyncio.wait_for(flushed, 30)  # before: WriteFailed, "the database system is shutting down"
    assert "the database system is shutting down" in caplog.text
    assert "one by one" not in caplog.text and "refused by the database" not in caplog.text
    assert await _counts(store) == (1, 2, 1 if path == "transaction" else 0)


@pytest.mark.parametrize("path", PATHS)
async def test_a_fast_stop_during_a_commit_is_waited_out_and_the_batch_written_once(
        cluster: PgCluster, store: SqlStore, path: str, caplog: pytest.LogCaptureFixture):
    async with store.engine.begin() as conn:  # a commit that takes a second: the stop comes in the middle
        await conn.execute(text("CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS "
                                "$$ BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$"))
        await conn.execute(text("CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON messages "
                                "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()"))
    session_id = await _first_turn(store)
    with caplog.at_level(logging.WARNING, logger="bot.store.writer"):
        await _queue_turn(store, session_id, path)
        flushed = asyncio.create_task(store.flush("turn-1"))
        await eventually(lambda: _sleeping(cluster), 20, "the batch's commit running")
        await asyncio.to_thread(cluster.stop)
        await asyncio.sleep(2.0)
        assert not flushed.done()
        await asyncio.to_thread(cluster.start)
        await asyncio.wait_for(flushed, 30)
    assert "the database is unavailable" in caplog.text
    assert "one by one" not in caplog.text and "refused by the database" not in caplog.text
    assert await _counts(store) == (1, 2, 1 if path == "transaction" else 0)


async def _refuses(cluster: PgCluster) -> bool:
    try:
        conn = await asyncpg.connect(_dsn(cluster))
    except asyncpg.CannotConnectNowError:
        return True
    await conn.close()
    return False


async def _sleeping(cluster: PgCluster) -> bool:
    conn = await asyncpg.connect(_dsn(cluster))
    try:
        return bool(await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'"))
    finally:
        await conn.close()


async def test_the_thread_locks_connection_closed_by_a_restart_is_replaced_before_the_next_lock(cluster: PgCluster):
    """The thread locks keep a connection of their own. A restart closed it while it sat idle, and the first
    turn to start after the server was back failed on it ("connection is closed"): an apology for a message
    that came after the outage. Now a closed connection is replaced before a lock is asked on it."""
    locks = PgSessionLock.for_url(cluster.url)
    try:
        async with locks.hold("slack:C1:th-before"):
            pass
        await asyncio.to_thread(cluster.stop)
        await asyncio.to_thread(cluster.start)
        async with asyncio.timeout(10), locks.hold("slack:C1:th-after"):
            pass
    finally:
        await locks.close()


async def test_an_outage_longer_than_the_limit_gives_up_the_batch_at_once_and_the_writer_goes_on(
        cluster: PgCluster, store: SqlStore, caplog: pytest.LogCaptureFixture):
    """Beyond YOKEBOT_DB_OUTAGE_SECONDS the held rows are given up, their turns told (WriteFailed), in one go:
    not waited out again row by row; the rows queued after the server is back are written."""
    session_id = await _first_turn(store)
    store.writes.outage_seconds = 1.0
    await asyncio.to_thread(cluster.stop)
    try:
        with caplog.at_level(logging.WARNING, logger="bot.store.writer"):
            await _queue_turn(store, session_id, "one statement")
            async with asyncio.timeout(10):
                with pytest.raises(WriteFailed, match="unreachable for over 1 s"):
                    await store.flush("turn-1")
        assert "giving up on 3 held rows" in caplog.text and "one by one" not in caplog.text
    finally:
        await asyncio.to_thread(cluster.start)
    await store.append(session_id, "turn-0", Message.user("after"))
    await store.flush("turn-0")
    assert await _counts(store) == (0, 0, 0)
