"""The write-behind queue: rows committed in order and in batches; a finished turn's rows are in; a row
the database refuses fails the turns that wrote it, not the others."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.engine.messages import Message
from bot.store.db import create_engine, ensure_schema
from bot.store.repositories import SqlStore
from bot.store.writer import WriteFailed
from tests.conftest import pgbouncer
from tests.fakes.tcp_proxy import TcpProxy


@pytest.fixture
async def store(db_url: str):
    engine = create_engine(db_url)
    await ensure_schema(engine)
    s = SqlStore(engine)
    yield s
    await s.close()
    await engine.dispose()


async def _contents(store: SqlStore, session_id: str) -> list[str]:
    async with store.engine.connect() as conn:
        rows = await conn.execute(text("SELECT content FROM messages WHERE session_id = :s ORDER BY id"),
                                  {"s": session_id})
        return [r.content for r in rows]


async def test_rows_from_concurrent_writers_keep_their_order(store: SqlStore):
    sessions = [await store.session_for("t", "c", f"th{i}", "a") for i in range(20)]

    async def writer(sid: str) -> None:
        for n in range(30):
            await store.append(sid, "turn", Message.user(f"{sid}:{n}"))
            if n % 7 == 0:
                await asyncio.sleep(0)

    await asyncio.gather(*(writer(s.id) for s in sessions))
    await store.flush()
    for s in sessions:
        assert await _contents(store, s.id) == [f"{s.id}:{n}" for n in range(30)]
    # the history the next turn reads sees all of it
    assert sum(len(t.messages) for t in (await store.load_thread(sessions[0].id, 100)).turns) == 30


async def test_a_refused_row_fails_the_flush_that_waits_for_it(store: SqlStore):
    store.writes.backoff = 0.01
    good = await store.session_for("t", "c", "good", "a")
    await store.append(good.id, "turn", Message.user("kept"))
    await store.flush()
    # a message for a session that does not exist violates the foreign key on both databases; it is queued
    # in the same batch as another turn's good rows, which must survive it
    await store.append(good.id, "turn-good", Message.user("same batch"))
    await store.append("no-such-session", "turn-bad", Message.user("orphan"))
    await store.append(good.id, "turn-good", Message.user("after"))
    await store.flush("turn-good")
    with pytest.raises(WriteFailed, match="refused part of this turn's records"):
        await store.flush("turn-bad")
    await store.flush("turn-bad")  # reported once
    assert await _contents(store, good.id) == ["kept", "same batch", "after"]


async def test_text_the_database_would_refuse_is_made_to_fit(store: SqlStore):
    from bot.engine.messages import ToolResult

    s = await store.session_for("t", "c", "nul", "a")
    await store.start_turn(s.id, "t1", "test", "u", "hello\x00world")
    await store.append(s.id, "t1", Message.user("hello\x00world"))
    await store.record_tool_call(s.id, "t1", "a", ToolResult("c" * 300, "x" * 100, {}, "out\x00put", "error"))
    await store.flush("t1")
    async with store.engine.connect() as conn:
        tool = (await conn.execute(text("SELECT tool, call_id, result FROM tool_invocations"))).one()
        turn = (await conn.execute(text("SELECT text FROM turns"))).one()
    assert len(tool.tool) == 64 and len(tool.call_id) == 128 and tool.result == "out\ufffdput"
    assert turn.text == "hello\ufffdworld"


async def test_close_commits_what_is_queued(db_url: str):
    engine = create_engine(db_url)
    await ensure_schema(engine)
    store = SqlStore(engine)
    s = await store.session_for("t", "c", "x", "a")
    for n in range(5):
        await store.append(s.id, "turn", Message.user(str(n)))
    await store.close()
    fresh = SqlStore(engine)
    assert await _contents(fresh, s.id) == ["0", "1", "2", "3", "4"]
    await engine.dispose()


async def test_a_reset_between_two_turns_in_one_batch_keeps_its_place(store: SqlStore):
    # the writer groups a batch's audit INSERTs per table; a reset (which covers "every message so far")
    # queued between two turns' messages must still fall between them
    s = await store.session_for("t", "c", "reset-in-batch", "a")
    await store.start_turn(s.id, "t1", "test", "u", "before")
    await store.append(s.id, "t1", Message.user("before"))
    await store.reset_thread(s.id, "t2")
    await store.start_turn(s.id, "t3", "test", "u", "after")
    await store.append(s.id, "t3", Message.user("after"))
    await store.flush()
    thread = await store.load_thread(s.id, 10)
    assert [m.content for t in thread.turns for m in t.messages] == ["after"]


async def test_a_turn_that_starts_and_ends_in_one_batch_is_recorded_whole(store: SqlStore):
    from bot.engine.messages import TurnOutcome

    s = await store.session_for("t", "c", "fold", "a")
    await store.start_turn(s.id, "fast", "test", "u", "hi")
    await store.append(s.id, "fast", Message.user("hi"))
    await store.record_plan("fast", {"steps": ["look"]})
    await store.finish_turn("fast", TurnOutcome("done", iterations=1, stopped_by="answer"))
    # and one whose end comes in a later batch than its start
    await store.start_turn(s.id, "slow", "test", "u", "hi again")
    await store.flush()
    await store.finish_turn("slow", TurnOutcome("later", iterations=2, stopped_by="answer"))
    async with store.engine.connect() as conn:
        rows = {r.id: r for r in await conn.execute(text(
            "SELECT id, status, answer, iterations, stopped_by, plan, finished_at FROM turns"))}
    fast, slow = rows["fast"], rows["slow"]
    assert (fast.status, fast.answer, fast.iterations, fast.stopped_by) == ("ok", "done", 1, "answer")
    assert fast.finished_at is not None and fast.plan is not None
    assert (slow.status, slow.answer, slow.iterations) == ("ok", "later", 2)


async def test_a_fast_turn_is_one_transaction(store: SqlStore):
    from sqlalchemy import event

    from bot.engine.messages import TurnOutcome

    s = await store.session_for("t", "c", "one-tx", "a")
    commits: list[int] = []
    engines = [store.engine.sync_engine] + ([store.writes._sync] if store.writes._sync is not None else [])
    for engine in engines:
        event.listen(engine, "commit", lambda _conn: commits.append(1))
    batches: list[int] = []
    real = store.writes._commit

    async def counted(batch):
        batches.append(len(batch))
        await real(batch)

    store.writes._commit = counted  # type: ignore[method-assign]
    await store.start_turn(s.id, "t1", "test", "u", "hi")
    for n in range(6):
        await store.append(s.id, "t1", Message.user(f"m{n}"))
    await store.finish_turn("t1", TurnOutcome("ok", iterations=1, stopped_by="answer"))
    assert len(batches) == 1
    # SQLite: one transaction; PostgreSQL: one statement (autocommit, so no transaction of SQLAlchemy's)
    assert len(commits) == (0 if store.engine.dialect.name == "postgresql" else 1)
    assert await _contents(store, s.id) == [f"m{n}" for n in range(6)]


async def _write_the_same_turns(store: SqlStore, tag: str) -> None:
    """Two turns with every kind of audit row (JSON with nulls and floats, NULLs, non-ASCII text), the second
    finished in a later batch than its start."""
    from bot.engine.messages import ToolCall, ToolResult, TurnOutcome, Usage
    from bot.store.repositories import LLMCallRecord

    s = await store.session_for("t", "c", f"eq-{tag}", "a")
    await store.start_turn(s.id, f"{tag}-a", "mention", "u", "hi \u00e9")
    call = ToolCall("c1", "echo", '{"text": "x"}')
    await store.append(s.id, f"{tag}-a", Message.user("hi"))
    await store.append(s.id, f"{tag}-a", Message.assistant("", (call,)))
    await store.append(s.id, f"{tag}-a", Message.tool("c1", "echo", "x"))
    await store.record_llm_call(LLMCallRecord(s.id, f"{tag}-a", "a", "m", 1, {"messages": [{"k": 1.5, "n": None}]},
                                              None, Usage(3, 4), 1.25, "stop"))
    await store.record_tool_call(s.id, f"{tag}-a", "a", ToolResult("c1", "echo", {"text": "x"}, "x", "ok", duration_ms=2.5))
    await store.finish_turn(f"{tag}-a", TurnOutcome("done", iterations=2, stopped_by="answer"))
    await store.start_turn(s.id, f"{tag}-b", "mention", None, "again")
    await store.flush()
    await store.append(s.id, f"{tag}-b", Message.user("again"))
    await store.record_plan(f"{tag}-b", {"steps": ["look"]})  # two UPDATEs of one row, merged in order
    await store.finish_turn(f"{tag}-b", TurnOutcome("later", iterations=1, stopped_by="answer"))
    await store.flush()


async def _same_rows(engine: AsyncEngine, queries: dict[str, str]) -> None:
    async with engine.connect() as conn:
        for table, sql in queries.items():
            one = [tuple(r) for r in await conn.execute(text(sql), {"p": "one-%"})]
            other = [tuple(r) for r in await conn.execute(text(sql), {"p": "tx-%"})]
            assert one and one == other, table


@pytest.mark.postgres
async def test_postgresql_one_statement_batch_writes_what_the_transaction_writes(pg_database: str):
    """The one-statement batch (json_populate_recordset in CTEs) against the usual transaction: the same
    rows, values, defaults, JSON (null included) and order; a finish in a later batch updates its row."""
    engine = create_engine(pg_database)
    await ensure_schema(engine)
    store = SqlStore(engine)
    used: list[bool] = []
    real = store.writes._one_statement

    def spy(batch):
        one = real(batch) if not forced_off else None
        used.append(one is not None)
        return one

    store.writes._one_statement = spy  # type: ignore[method-assign]
    try:
        for forced_off in (False, True):
            await _write_the_same_turns(store, "tx" if forced_off else "one")
        assert True in used and False in used  # both paths ran
        assert used.count(True) == used.count(False)  # every batch of the first pass was one statement
        await _same_rows(engine, {
            "turns": "SELECT trigger, \"user\", text, answer, iterations, hit_limit, prompt_tokens, status, "
                     "error, stopped_by, plan::text, owner, finished_at IS NOT NULL AS fin "
                     "FROM turns WHERE id LIKE :p ORDER BY id",
            "messages": "SELECT role, content, tool_calls::text, tool_calls IS NULL AS sql_null, tool_call_id, name "
                        "FROM messages WHERE turn_id LIKE :p ORDER BY id",
            "llm_calls": "SELECT agent, model, attempt, request::text, response::text, response IS NULL AS sql_null,"
                         " prompt_tokens, completion_tokens, latency_ms, finish_reason, error, purpose "
                         "FROM llm_calls WHERE turn_id LIKE :p ORDER BY id",
            "tool_invocations": "SELECT call_id, tool, arguments::text, result, status, attempts "
                                "FROM tool_invocations WHERE turn_id LIKE :p ORDER BY id",
        })
    finally:
        await store.close()
        await engine.dispose()


async def test_sqlite_driver_inserts_write_what_sqlalchemy_writes(sqlite_url: str):
    """SQLite's audit INSERTs and new sessions go straight through sqlite3 on the writer's thread
    (bot/store/sqlite_inserts.py): the same rows, stored the same way to the byte (JSON text, NULL against JSON
    null, the DateTime text and the Python-side defaults) as SQLAlchemy's own statements write them."""
    engine = create_engine(sqlite_url)
    await ensure_schema(engine)
    store = SqlStore(engine)
    raw = store.writes.sqlite_inserts
    assert raw is not None
    ran: list[bool] = []
    real = raw.run

    def spy(conn, statement, rows):
        ran.append(real(conn, statement, rows))
        return ran[-1]

    raw.run = spy  # type: ignore[method-assign]
    try:
        await _write_the_same_turns(store, "one")
        assert ran and all(ran)  # the driver path wrote every INSERT of the audit
        store.writes.sqlite_inserts = None  # SQLAlchemy's executemany (and its INSERT of the new session)
        await _write_the_same_turns(store, "tx")
        stored = "typeof({0}), {0}"
        await _same_rows(engine, {
            "sessions": "SELECT platform, channel, agent, typeof(created_at), length(created_at), "
                        "typeof(updated_at), length(updated_at) FROM sessions "
                        "WHERE thread = 'eq-' || substr(:p, 1, length(:p) - 2)",
            "turns": f"SELECT trigger, user, text, answer, iterations, hit_limit, prompt_tokens, status, error, "
                     f"stopped_by, {stored.format('plan')}, owner, finished_at IS NOT NULL, "
                     f"typeof(started_at), length(started_at) FROM turns WHERE id LIKE :p ORDER BY id",
            "messages": f"SELECT role, content, {stored.format('tool_calls')}, tool_call_id, name, "
                        f"typeof(created_at), length(created_at) FROM messages WHERE turn_id LIKE :p ORDER BY id",
            "llm_calls": f"SELECT agent, model, attempt, {stored.format('request')}, {stored.format('response')}, "
                         f"prompt_tokens, completion_tokens, latency_ms, finish_reason, error, purpose, "
                         f"typeof(created_at), length(created_at) FROM llm_calls WHERE turn_id LIKE :p ORDER BY id",
            "tool_invocations": f"SELECT call_id, tool, {stored.format('arguments')}, result, status, attempts, "
                                f"duration_ms, typeof(created_at) FROM tool_invocations WHERE turn_id LIKE :p "
                                f"ORDER BY id",
        })
    finally:
        await store.close()
        await engine.dispose()


Proxied = tuple[SqlStore, AsyncEngine, TcpProxy]


@pytest.fixture(params=["direct", pytest.param("session", id="pgbouncer-session")])
async def proxied(pg_database: str, request: pytest.FixtureRequest) -> AsyncIterator[Proxied]:
    """A store on a migrated PostgreSQL database reached through a TCP proxy the test can cut: in front of
    PostgreSQL, or of a PgBouncer in session pooling (whose process ids are its own: the writer asks the server
    for the one to end). In transaction pooling the writer is on the direct URL (bot/store/pooling.py)."""
    direct = create_engine(pg_database)
    await ensure_schema(direct)
    await direct.dispose()
    session = request.param == "session"
    proxy = TcpProxy("127.0.0.1", pgbouncer("session").port if session else 5432).start()
    host_part, dbname = pg_database.rsplit("/", 1)
    engine = create_engine(host_part.rsplit(":", 1)[0] + f":{proxy.port}/{dbname}", pooled=session,
                           server_pids=session)
    store = SqlStore(engine)
    store.writes.backoff = 0.01
    try:
        yield store, engine, proxy
    finally:
        await store.close()
        await engine.dispose()
        proxy.stop()


@pytest.mark.postgres
@pytest.mark.parametrize("path", ["transaction", "one statement", "one statement, lost on the way"])
async def test_a_commit_whose_answer_is_lost_is_not_written_twice(proxied: Proxied, path: str,
                                                                 caplog: pytest.LogCaptureFixture):
    """The connection drops after COMMIT reached PostgreSQL and before its answer came back: the batch is in,
    but the writer cannot know. Before, the retry inserted the turn row again, the primary key refused it, and
    the turn failed ("Sorry") although its rows were all stored; now the writer asks first. The same for the
    one-statement batch (autocommit): its statement reached the server, its answer did not."""
    store, engine, proxy = proxied
    session = await store.session_for("t", "c", "th", "a")
    if path == "transaction":
        store.writes._one_statement = lambda _batch: None  # type: ignore[method-assign]
        proxy.cut_after(b"COMMIT;")  # the simple query that ends a transaction
    elif path == "one statement":
        proxy.cut_after(b"json_to_recordset")  # the batch's one statement (autocommit: it commits alone)
    else:  # it never reaches the server: asyncpg's own "connection was closed" must count as an outage
        proxy.cut_after(b"json_to_recordset", forward=False)
    await store.start_turn(session.id, "turn-1", "mention", "U1", "hello")
    await store.append(session.id, "turn-1", Message.user("hello"))
    with caplog.at_level(logging.WARNING, logger="bot.store.writer"):
        await store.flush("turn-1")  # raised WriteFailed before
    assert proxy.cuts == 1
    # a lost connection is an outage, waited out; not a refused row (one by one, each on a dead database)
    assert "the database is unavailable" in caplog.text and "one by one" not in caplog.text, caplog.text
    async with engine.connect() as conn:
        turns = (await conn.execute(text("SELECT count(*) FROM turns"))).scalar()
        messages = (await conn.execute(text("SELECT count(*) FROM messages"))).scalar()
    assert (turns, messages) == (1, 1)


@pytest.mark.postgres
@pytest.mark.parametrize("path", ["transaction", "one statement"])
@pytest.mark.parametrize("commit", ["done", "still running"])
async def test_a_lost_commit_of_audit_rows_alone_is_not_written_twice(proxied: Proxied, path: str, commit: str):
    """A batch with no turn row in it (a message and a model call of a turn that started earlier): its rows
    tell by their turn and time whether the commit that went unanswered was made; none is stored twice.
    "still running": the server is still committing when the connection drops (a commit-time trigger makes
    that take a second). Asked at once, "is it in?" said no, and the batch went in twice (a flaky failure in
    CI): the first commit finished after the question. Now the lost connection's server process is ended, and
    waited for, first."""
    from bot.engine.messages import Usage
    from bot.store.repositories import LLMCallRecord

    store, engine, proxy = proxied
    if commit == "still running":
        async with engine.begin() as conn:
            await conn.execute(text("CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS "
                                    "$$ BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$"))
            await conn.execute(text("CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON messages "
                                    "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()"))
    session = await store.session_for("t", "c", "th", "a")
    await store.start_turn(session.id, "turn-1", "mention", "U1", "hello")
    await store.flush("turn-1")
    if path == "transaction":
        store.writes._one_statement = lambda _batch: None  # type: ignore[method-assign]
    proxy.cut_after(b"COMMIT;" if path == "transaction" else b"json_to_recordset")
    await store.append(session.id, "turn-1", Message.user("hello"))
    await store.record_llm_call(LLMCallRecord(session.id, "turn-1", "a", "m", 1, {}, {}, Usage(1, 1), 5, "stop",
                                              None))
    await store.flush("turn-1")
    assert proxy.cuts == 1
    async with engine.connect() as conn:
        messages = (await conn.execute(text("SELECT count(*) FROM messages"))).scalar()
        calls = (await conn.execute(text("SELECT count(*) FROM llm_calls"))).scalar()
    assert (messages, calls) == (1, 1)


@pytest.mark.postgres
async def test_a_commit_lost_on_a_dead_network_does_not_wait_for_the_server_to_notice(proxied: Proxied):
    """COMMIT never arrives and the server does not see the client go (a dead network, not a closed socket):
    its transaction stays open, the turn row's key locked, until TCP gives up (minutes to hours). The retry's
    INSERT of that row waited on the lock all that time; now the stale server process is ended first, its
    transaction rolled back, and the batch is written once."""
    store, engine, proxy = proxied
    session = await store.session_for("t", "c", "th", "a")
    store.writes._one_statement = lambda _batch: None  # type: ignore[method-assign]
    proxy.cut_after(b"COMMIT;", forward=False, hold=True)
    await store.start_turn(session.id, "turn-1", "mention", "U1", "hello")
    await store.append(session.id, "turn-1", Message.user("hello"))
    async with asyncio.timeout(30):  # before: waited on the dead transaction's lock for good
        await store.flush("turn-1")
    assert proxy.cuts == 1
    async with engine.connect() as conn:
        turns = (await conn.execute(text("SELECT count(*) FROM turns"))).scalar()
        messages = (await conn.execute(text("SELECT count(*) FROM messages"))).scalar()
        stale = (await conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                         "AND state = 'idle in transaction'"))).scalar()
    assert (turns, messages, stale) == (1, 1, 0)
