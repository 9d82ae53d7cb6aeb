"""SqlStore: sessions, history, turns, audit rows and memories on SQLAlchemy 2 (SQLite or PostgreSQL).

A turn's rows (turn, messages, model calls, tool calls) go through the write-behind queue (`writer.py`):
committed in order and in batches off the turn's critical path; `finish_turn` waits until they are in."""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import cache
from itertools import groupby
from typing import Any, cast, overload

from sqlalchemy import (
    Connection,
    Table,
    bindparam,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import Executable
from sqlalchemy.sql.dml import Insert

from bot.engine.messages import HistoryTurn, Message, Thread, ToolResult, Trigger, TurnOutcome, Usage
from bot.engine.ports import Embedder, SessionRecord
from bot.store.claims import BatchedInsert
from bot.store.memory import SqlMemory
from bot.store.models import (
    Base,
    LLMCallRow,
    MemoryRow,
    MessageRow,
    ProcessedEventRow,
    SessionRow,
    SummaryRow,
    ToolInvocationRow,
    TurnRow,
    utcnow,
)
from bot.store.owner import instance_id
from bot.store.recordset import Recordsets, run_raw, with_defaults
from bot.store.writer import FoldedUpdate, Write, WriteBehind

Params = dict[str, Any] | list[dict[str, Any]]  # one row, or many (executemany)


def _t(model: type[Base]) -> Table:
    return cast(Table, model.__table__)


S, M, T = _t(SessionRow), _t(MessageRow), _t(TurnRow)
L, TI, MEM, EVENTS = _t(LLMCallRow), _t(ToolInvocationRow), _t(MemoryRow), _t(ProcessedEventRow)
SUM = _t(SummaryRow)

# Hot-path statements are built once and executed with parameters: building a Core statement per call
# (coercions, cache-key generation) cost more than running it (bench/README.md, benchmark 1).
_SESSION_BY_KEY = select(S).where(S.c.platform == bindparam("b_platform"),
                                  S.c.channel == bindparam("b_channel"), S.c.thread == bindparam("b_thread"))
_INSERT_MESSAGE, _INSERT_TURN = insert(M), insert(T)
_INSERT_LLM_CALL, _INSERT_TOOL_CALL = insert(L), insert(TI)
_AUDIT_INSERTS: dict[Executable, Table] = {_INSERT_MESSAGE: M, _INSERT_LLM_CALL: L, _INSERT_TOOL_CALL: TI}
_SESSION_BY_ID = select(S).where(S.c.id == bindparam("b_id"))
_TOUCH_SESSION = update(S).where(S.c.id == bindparam("b_id"))
_FINISH_TURN = update(T).where(T.c.id == bindparam("b_id"))
# A thread in two round trips: the latest summary (or reset), then the turns after the message it reaches
# (from the id of the user message that opens the oldest kept turn).
_LATEST_SUMMARY = (select(SUM.c.kind, SUM.c.content, SUM.c.through_message_id)
                   .where(SUM.c.session_id == bindparam("b_session")).order_by(SUM.c.id.desc()).limit(1))
_OLDEST_KEPT_AFTER = (select(M.c.id).where(M.c.session_id == bindparam("b_session"), M.c.role == "user",
                                           M.c.id > bindparam("b_after"))
                      .order_by(M.c.id.desc()).offset(bindparam("b_skip")).limit(1).scalar_subquery())
_THREAD = (select(M).where(M.c.session_id == bindparam("b_session"), M.c.id > bindparam("b_after"),
                           M.c.id >= func.coalesce(_OLDEST_KEPT_AFTER, 0))
           .order_by(M.c.id))
_LAST_MESSAGE_OF_TURN = (select(func.max(M.c.id)).where(M.c.session_id == bindparam("b_session"),
                                                         M.c.turn_id == bindparam("b_through")).scalar_subquery())
_LAST_MESSAGE = select(func.max(M.c.id)).where(M.c.session_id == bindparam("b_session")).scalar_subquery()
_SUMMARY_VALUES: dict[str, Any] = {
    "session_id": bindparam("b_session"), "turn_id": bindparam("b_turn"), "kind": bindparam("b_kind"),
    "content": bindparam("b_content"), "folded_turns": bindparam("b_folded"), "created_at": bindparam("b_created")}
_INSERT_SUMMARY = insert(SUM).values(**_SUMMARY_VALUES, through_message_id=func.coalesce(_LAST_MESSAGE_OF_TURN, 0))
_INSERT_RESET = insert(SUM).values(**_SUMMARY_VALUES, through_message_id=func.coalesce(_LAST_MESSAGE, 0))


@dataclass(frozen=True, slots=True)
class LLMCallRecord:
    """One `llm_calls` row: a model call attempt as sent and as answered."""

    session_id: str
    turn_id: str
    agent: str
    model: str
    attempt: int
    request: dict[str, Any]
    response: dict[str, Any] | None
    usage: Usage
    latency_ms: float
    finish_reason: str | None = None
    error: str | None = None
    purpose: str = "turn"  # turn | final (the last call without tools) | compaction (a summary)
    parent_turn_id: str | None = None  # a sub-agent's call: the turn that handed it its task


class RecentSessions:
    """A small LRU of session records with a time limit, so a pruned session is forgotten long before it
    could be pruned (prune removes sessions idle for days)."""

    def __init__(self, size: int = 4096, ttl: float = 300.0) -> None:
        self.size, self.ttl = size, ttl
        self._items: OrderedDict[tuple[str, str, str], tuple[SessionRecord, float]] = OrderedDict()

    def get(self, key: tuple[str, str, str]) -> SessionRecord | None:
        item = self._items.get(key)
        if item is None or item[1] < time.monotonic():
            self._items.pop(key, None)
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: tuple[str, str, str], record: SessionRecord) -> None:
        self._items[key] = (record, time.monotonic() + self.ttl)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


class Touches:
    """When each recent session's `updated_at` was last written: a busy thread writes it at most once per
    `every` seconds rather than on each turn (it orders `yokebot sessions` and tells prune what is idle)."""

    def __init__(self, every: float = 60.0, size: int = 4096) -> None:
        self.every, self.size = every, size
        self._last: OrderedDict[str, float] = OrderedDict()

    def due(self, session_id: str) -> bool:
        """True if the session's `updated_at` should be written now (and note that it is)."""
        now = time.monotonic()
        last = self._last.get(session_id)
        if last is not None and now - last < self.every:
            return False
        self._last[session_id] = now
        self._last.move_to_end(session_id)
        while len(self._last) > self.size:
            self._last.popitem(last=False)
        return True


@cache
def _sqlite_insert_new(table: Table, returning: tuple[str, ...]) -> Insert:
    return sqlite_insert(table).on_conflict_do_nothing().returning(*(table.c[c] for c in returning))


@overload
def _text(value: str) -> str: ...
@overload
def _text(value: str | None) -> str | None: ...
def _text(value: str | None) -> str | None:
    """PostgreSQL refuses NUL in text; model output and chat messages can carry one."""
    return value.replace("\x00", "\ufffd") if value else value


def _short(value: str | None, limit: int) -> str | None:
    """Fit a model-chosen name or id into its column (PostgreSQL enforces VARCHAR lengths; SQLite does not)."""
    value = _text(value)
    return value if value is None or len(value) <= limit else value[: limit - 1] + "…"


def new_id() -> str:
    return uuid.uuid4().hex[:16]


def _session(row: Any) -> SessionRecord:
    return SessionRecord(id=row.id, platform=row.platform, channel=row.channel, thread=row.thread, agent=row.agent)


def _message(row: Any) -> Message:
    return Message.from_dict(row._mapping)


def _batch_committed(conn: Connection, batch: Sequence[Write]) -> bool:
    """Whether a batch whose commit went unanswered is in the database: it is one transaction (or one
    statement), so one of its rows tells for all of it: a turn's INSERT by its id, the finishing UPDATE by its
    time, or an audit row by its turn and the microsecond it was made. A batch with none of these (a session
    touch, a reset alone) cannot tell and is written again; those statements are harmless twice."""
    for statement, params, _ in batch:
        if statement is _INSERT_TURN:
            return conn.execute(select(T.c.id).where(T.c.id == params["id"])).first() is not None
    for statement, params, _ in batch:
        if statement is _FINISH_TURN and params.get("finished_at") is not None:
            row = conn.execute(select(T.c.finished_at).where(T.c.id == params["b_id"])).first()
            return row is not None and row.finished_at is not None and _utc(row.finished_at) == _utc(
                params["finished_at"])
    for statement, params, _ in batch:
        table = _AUDIT_INSERTS.get(statement)
        if table is not None and params.get("turn_id") is not None and params.get("created_at") is not None:
            found = select(table.c.id).where(table.c.turn_id == params["turn_id"],
                                             table.c.created_at == params["created_at"]).limit(1)
            return conn.execute(found).first() is not None
    return False


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class SqlStore:
    """Implements the engine's SessionStore port (and, as `memory`, its MemoryStore); `recorder.py` writes
    turns through it."""

    def __init__(self, engine: AsyncEngine, *, outage_seconds: float = 120.0, owner: str | None = None,
                 direct: AsyncEngine | None = None, embedder: Embedder | None = None) -> None:
        self.engine = engine
        # PostgreSQL behind a transaction pooler: the same database without it (YOKEBOT_DATABASE_DIRECT_URL), for
        # what needs a session of its own: the writer (its lost-commit check ends its server process), the
        # inbox's LISTEN (bot/store/pooling.py); else the same engine
        self.direct = direct or engine
        self.owner = owner or instance_id()  # this process: written on each turn it runs (`turns.owner`)
        # plain INSERTs of audit rows: a batch groups each table's rows into one executemany; a turn that ends
        # in the batch that starts it is one INSERT (nothing in a batch reads a turn row)
        self.writes = WriteBehind(self.direct, outage_seconds=outage_seconds,
                                  reorderable=(_INSERT_TURN, _INSERT_MESSAGE, _INSERT_LLM_CALL, _INSERT_TOOL_CALL),
                                  folds=(FoldedUpdate(_FINISH_TURN, "b_id", _INSERT_TURN, "id"),),
                                  committed=_batch_committed)
        self._recent = RecentSessions()
        self._touches = Touches()
        # PostgreSQL: a statement that stands alone runs in autocommit (one round trip, where BEGIN, the
        # statement and COMMIT or ROLLBACK were three; a single statement is atomic either way)
        self._single = (engine.execution_options(isolation_level="AUTOCOMMIT")
                        if engine.dialect.name == "postgresql" else None)
        self._recordsets = Recordsets(engine.dialect)
        self._insert_sql: dict[tuple[str, tuple[str, ...], tuple[str, ...]], str] = {}  # shape -> its text
        self._claims: BatchedInsert[tuple[str, str], bool] = BatchedInsert(self._insert_new_events)
        # the sessions of new threads that open while one INSERT runs go into the next (a burst of mentions)
        self._new_sessions: BatchedInsert[tuple[str, str, str], SessionRecord] = BatchedInsert(self._insert_sessions)
        self.memory = SqlMemory(self, embedder)  # the engine's MemoryStore (bot/store/memory.py)

    async def rows(self, statement: Executable, params: Params, *, write: bool = False) -> list[Any]:
        """Run one statement that returns rows (`write`: it changes something, and commits)."""
        if self.writes.threaded:  # SQLite: one hop to the writer's thread instead of several through aiosqlite
            return await self.writes.call(lambda conn: list(conn.execute(statement, params).all()), write=write)
        if self._single is not None:
            async with self._single.connect() as conn:
                return list((await conn.execute(statement, params)).all())
        async with self.engine.begin() if write else self.engine.connect() as conn:
            return list((await conn.execute(statement, params)).all())

    async def insert_new(self, table: Table, rows: list[dict[str, Any]], returning: Sequence[str]
                         ) -> list[tuple[Any, ...]]:
        """INSERT the rows (all with the same columns) in one statement, leaving out those whose key is taken
        (`ON CONFLICT DO NOTHING`, SQLite >= 3.35 and PostgreSQL); of each row inserted, the columns named in
        `returning`. PostgreSQL: the rows as one JSON parameter (bot/store/recordset.py), a
        statement text per shape, prepared once; SQLite: on the writer's thread (one row: a plain INSERT)."""
        if self._single is not None:
            rows = with_defaults(table, rows)  # the Python-side defaults SQLAlchemy would have filled in
            shape = (table.name, tuple(rows[0]), tuple(returning))
            sql = self._insert_sql.get(shape)
            if sql is None:
                if any(name not in table.columns for name in (*rows[0], *returning)):
                    raise ValueError(f"not a column of {table.name}")  # names in the SQL are the schema's own
                back = ", ".join(self._recordsets.quote(name) for name in returning)
                sql = self._insert_sql[shape] = (f"{self._recordsets.insert(table, list(rows[0]))} "
                                                 f"ON CONFLICT DO NOTHING RETURNING {back}")
            return [tuple(r) for r in await run_raw(self._single, sql, self._recordsets.rows_json(table, rows),
                                                     fetch=True)]
        statement = _sqlite_insert_new(table, tuple(returning))
        inserts = self.writes.sqlite_inserts  # a SQLite file: straight through sqlite3 on the writer's thread
        if inserts is not None:
            done = await self.writes.call(lambda conn: inserts.insert_new(conn, statement, rows), write=True)
            if done is not None:
                return done
        return [tuple(r) for r in await self.rows(statement, rows if len(rows) > 1 else rows[0], write=True)]

    async def execute(self, statement: Executable, params: dict[str, Any]) -> None:
        """Run one statement that returns nothing, and commit it (not through the write-behind queue)."""
        if self.writes.threaded:
            await self.writes.call(lambda conn: conn.execute(statement, params), write=True)
            return
        async with self._single.connect() if self._single is not None else self.engine.begin() as conn:
            await conn.execute(statement, params)

    async def flush(self, turn_id: str | None = None) -> None:
        """Wait until every queued row is committed; with a turn id, raise WriteFailed if one of its was refused."""
        await self.writes.flush(turn_id)

    async def close(self) -> None:
        await self.memory.close()
        await self.writes.close()
        if self.direct is not self.engine:  # its own: made for this store (bot/app.py `open_store`)
            await self.direct.dispose()

    # --- sessions -----------------------------------------------------------------------------------------
    async def session_for(self, platform: str, channel: str, thread: str, agent: str) -> SessionRecord:
        """The session of (platform, channel, thread), created on first use: one insert for a new thread,
        no query at all for a thread seen in the last minutes (sessions never change once made)."""
        cached = self._recent.get((platform, channel, thread))
        if cached is not None:
            return cached
        record = await self._new_sessions.claim((platform, channel, thread), agent)
        if record is None:  # the thread has its session already (or another turn just made it)
            key = {"b_platform": platform, "b_channel": channel, "b_thread": thread}
            record = _session((await self.rows(_SESSION_BY_KEY, key))[0])
        self._recent.put((platform, channel, thread), replace(record, created=False))
        if record.created:
            self._touches.due(record.id)  # made just now: its updated_at is current
        return record

    async def _insert_sessions(self, threads: Sequence[tuple[tuple[str, str, str], Any]]
                               ) -> dict[tuple[str, str, str], SessionRecord]:
        now = utcnow()
        made = {key: SessionRecord(new_id(), *key, agent=agent, created=True) for key, agent in threads}
        rows = [{"id": r.id, "platform": r.platform, "channel": r.channel, "thread": r.thread, "agent": r.agent,
                 "created_at": now, "updated_at": now} for r in made.values()]
        inserted = await self.insert_new(S, rows, ("platform", "channel", "thread"))
        return {key: made[key] for key in inserted}

    async def get_session(self, session_id: str) -> SessionRecord | None:
        rows = await self.rows(_SESSION_BY_ID, {"b_id": session_id})
        return _session(rows[0]) if rows else None

    # --- history --------------------------------------------------------------------------------------------
    async def load_thread(self, session_id: str, max_turns: int) -> Thread:
        """The latest summary and at most `max_turns` turns after it, each with its turn id, read from the
        (session_id, id) index: cost does not grow with the table."""
        found = await self.rows(_LATEST_SUMMARY, {"b_session": session_id})
        summary, after = (found[0].content or None, int(found[0].through_message_id)) if found else (None, 0)
        if max_turns <= 0:
            return Thread(summary, [])
        rows = await self.rows(_THREAD, {"b_session": session_id, "b_after": after, "b_skip": max_turns - 1})
        turns: list[HistoryTurn] = []
        for turn_id, group in groupby(rows, key=lambda r: r.turn_id):
            turns.append(HistoryTurn(turn_id, tuple(_message(r) for r in group)))
        return Thread(summary, turns)

    async def save_summary(self, session_id: str, turn_id: str, through_turn_id: str, text: str,
                           folded_turns: int) -> None:
        """Queued with the turn's rows: it covers every message up to the last one of `through_turn_id`."""
        self.writes.put(_INSERT_SUMMARY, {
            "b_session": session_id, "b_turn": turn_id, "b_kind": "summary", "b_content": _text(text),
            "b_folded": folded_turns, "b_created": utcnow(), "b_through": through_turn_id,
        }, turn_id)

    async def reset_thread(self, session_id: str, turn_id: str | None = None) -> None:
        """Forget the thread so far: later prompts carry nothing from before this point."""
        self.writes.put(_INSERT_RESET, {
            "b_session": session_id, "b_turn": turn_id, "b_kind": "reset", "b_content": "", "b_folded": 0,
            "b_created": utcnow(),
        }, turn_id)
        if turn_id is None:
            await self.writes.flush()

    async def append(self, session_id: str, turn_id: str, message: Message) -> None:
        row = message.to_dict()  # its stored form, fitted to the columns
        row["content"] = _text(message.content)
        row["tool_call_id"] = _short(message.tool_call_id, 128)
        row["name"] = _short(message.name, 128)
        row["session_id"] = session_id
        row["turn_id"] = turn_id
        row["created_at"] = utcnow()
        self.writes.put(_INSERT_MESSAGE, row, turn_id)

    # --- turns ----------------------------------------------------------------------------------------------
    async def start_turn(self, session_id: str, turn_id: str, trigger: Trigger, user: str | None, text: str,
                         parent: tuple[str, str] | None = None) -> None:
        """`parent`: a sub-agent's turn names the turn and the `delegate` call that handed it its task."""
        now = utcnow()
        self.writes.put(_INSERT_TURN, {"id": turn_id, "session_id": session_id, "trigger": trigger,
                                       "user": _short(user, 255), "text": _text(text), "started_at": now,
                                       "status": "running", "owner": self.owner,
                                       "parent_turn_id": parent[0] if parent else None,
                                       "parent_call_id": _short(parent[1], 128) if parent else None}, turn_id)
        if self._touches.due(session_id):  # `sessions.updated_at` (listing, prune) is kept to the minute
            self.writes.put(_TOUCH_SESSION, {"b_id": session_id, "updated_at": now}, turn_id)

    def queue_finish(self, turn_id: str, outcome: TurnOutcome) -> None:
        self.writes.put(_FINISH_TURN, {
            "b_id": turn_id, "answer": _text(outcome.answer), "iterations": outcome.iterations,
            "hit_limit": outcome.status == "limit", "prompt_tokens": outcome.usage.prompt_tokens,
            "completion_tokens": outcome.usage.completion_tokens, "status": outcome.status,
            "error": _text(outcome.error), "stopped_by": _short(outcome.stopped_by, 64), "finished_at": utcnow(),
        }, turn_id)

    async def finish_turn(self, turn_id: str, outcome: TurnOutcome) -> None:
        """Record the outcome and wait until every row of the turn is committed (WriteFailed if one was not)."""
        self.queue_finish(turn_id, outcome)
        await self.writes.flush(turn_id)

    async def record_plan(self, turn_id: str, plan: dict[str, Any]) -> None:
        """The plan of a `mode: plan` turn (steps, findings, replans), stored with the turn."""
        self.writes.put(_FINISH_TURN, {"b_id": turn_id, "plan": plan}, turn_id)

    # --- audit ----------------------------------------------------------------------------------------------
    async def record_llm_call(self, record: LLMCallRecord) -> None:
        self.writes.put(_INSERT_LLM_CALL, {
            "session_id": record.session_id, "turn_id": record.turn_id, "agent": record.agent,
            "model": _short(record.model, 128), "attempt": record.attempt, "request": record.request,
            "response": record.response, "prompt_tokens": record.usage.prompt_tokens,
            "completion_tokens": record.usage.completion_tokens, "latency_ms": record.latency_ms,
            "finish_reason": _short(record.finish_reason, 32), "error": _text(record.error), "created_at": utcnow(),
            "purpose": record.purpose, "parent_turn_id": record.parent_turn_id,
        }, record.turn_id)

    async def record_tool_call(self, session_id: str, turn_id: str, agent: str, result: ToolResult,
                               parent_turn_id: str | None = None) -> None:
        self.writes.put(_INSERT_TOOL_CALL, {
            "session_id": session_id, "turn_id": turn_id, "agent": agent, "call_id": _short(result.call_id, 128),
            "tool": _short(result.tool, 64), "arguments": result.arguments, "result": _text(result.audit_text),
            "status": result.status, "reason": _text(result.reason), "attempts": result.attempts,
            "duration_ms": result.duration_ms, "created_at": result.finished_at or utcnow(),
            "parent_turn_id": parent_turn_id,
        }, turn_id)

    # --- exactly-once platform events ----------------------------------------------------------------------
    async def claim_event(self, platform: str, event_id: str) -> bool:
        """True the first time (platform, event_id) is seen, in any process sharing the database."""
        return bool(await self._claims.claim((platform, event_id)))

    async def _insert_new_events(self, keys: Sequence[tuple[tuple[str, str], Any]]) -> dict[tuple[str, str], bool]:
        now = utcnow()
        rows = [{"platform": p, "event_id": e, "received_at": now} for (p, e), _ in keys]
        return {(platform, event_id): True for platform, event_id in
                await self.insert_new(EVENTS, rows, ("platform", "event_id"))}
