"""SqlMemory: the long-term facts (`memories`), recalled by relevance (docs/knowledge.md).

Keywords: SQLite's FTS5 table `memories_fts` ranked by BM25, PostgreSQL's tsvector column `search` ranked by
ts_rank (migration 0015); the query is built from the text's words (keywords.py), so no text errors it. One
statement per recall: the best keyword matches and the newest facts (which fill the list when fewer match).
Embeddings (an `Embedder`, YOKEBOT_EMBEDDING_MODEL): the query's vector is compared with the candidates' stored
vectors (vectors.py), and the two rankings are merged by reciprocal rank fusion, recency breaking ties; an
embedding that fails leaves the keywords alone.

A recall that is running is shared by the recalls of the same memories asked meanwhile (a burst in one channel),
never across a `remember` or `forget` of this process. Recall counts (`recalled`) are kept in memory and written
at most once a minute, and before a `remember` decides which fact a full channel drops."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, cast

from sqlalchemy import (
    BigInteger,
    DateTime,
    Float,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    bindparam,
    delete,
    exists,
    func,
    insert,
    select,
    update,
)
from sqlalchemy import text as sql_text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import Executable

from bot.engine.ports import Embedder, MemoryItem, Remembered
from bot.store.keywords import fts5_match, terms, tsquery
from bot.store.models import MemoryRow, utcnow
from bot.store.vectors import fuse, pack, similarity
from bot.store.writer import WriteBehind

log = logging.getLogger(__name__)

MEM = cast(Table, MemoryRow.__table__)
Where = Literal["channel", "shared", "any"]  # the channel's facts and the shared ones; the shared ones; all
COUNTS_EVERY = 60.0  # seconds between writes of the recall counts
CANDIDATES = 40  # with embeddings: keyword matches and newest facts compared by vector, at least

_COLUMNS = ("m.id, m.agent, m.channel, m.content, m.created_at, m.embedding, m.embedding_model")
_TYPES: dict[str, Any] = {"id": BigInteger, "created_at": DateTime(timezone=True), "embedding": LargeBinary,
                          "embedding_model": String, "score": Float, "recent": Integer}
_SCOPE = {"channel": " AND (m.channel IS NULL OR m.channel = :channel)", "shared": " AND m.channel IS NULL",
          "any": ""}
_VECTOR = (update(MEM).where(MEM.c.id == bindparam("b_id"))
           .values(embedding=bindparam("b_vector"), embedding_model=bindparam("b_model")))
BACKFILL = 32  # facts without a vector (stored before embeddings were on, or while they failed) embedded at once
_COUNT = (update(MEM).where(MEM.c.id == bindparam("b_id"))
          .values(recalls=MEM.c.recalls + bindparam("b_n", type_=Integer), last_recalled_at=bindparam("b_at")))


def _newest(where: Where) -> str:
    """The newest facts, each channel filter its own index range (an OR of two would sort the whole channel)."""
    one = (f"SELECT {_COLUMNS}, CAST(0 AS REAL) AS score, 1 AS recent FROM memories m "  # noqa: S608
           "WHERE m.agent = :agent{scope} ORDER BY m.id DESC LIMIT :r")
    if where == "channel":
        return (f"SELECT * FROM ({one.format(scope=' AND m.channel = :channel')}) n1 UNION ALL "  # noqa: S608
                f"SELECT * FROM ({one.format(scope=' AND m.channel IS NULL')}) n2")
    return f"SELECT * FROM ({one.format(scope=_SCOPE[where])}) n1"  # noqa: S608


def _statement(dialect: str, where: Where, keywords: bool) -> Executable:
    parts: list[str] = []
    if keywords and dialect == "sqlite":
        parts.append(f"SELECT * FROM (SELECT {_COLUMNS}, -memories_fts.rank AS score, 0 AS recent "  # noqa: S608
                     "FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid "
                     f"WHERE memories_fts MATCH :q AND m.agent = :agent{_SCOPE[where]} "
                     "ORDER BY memories_fts.rank LIMIT :n) k")
    elif keywords:
        parts.append(f"SELECT * FROM (SELECT {_COLUMNS}, ts_rank(m.search, q) AS score, 0 AS recent "  # noqa: S608
                     "FROM memories m, to_tsquery('english', :q) q "
                     f"WHERE m.search @@ q AND m.agent = :agent{_SCOPE[where]} "
                     "ORDER BY score DESC, m.id DESC LIMIT :n) k")
    parts.append(_newest(where))
    return sql_text(" UNION ALL ".join(parts)).columns(**_TYPES)


class Connections(Protocol):
    """What the memory uses of the store (SqlStore, bot/store/repositories.py)."""

    @property
    def engine(self) -> AsyncEngine: ...
    @property
    def writes(self) -> WriteBehind: ...
    async def rows(self, statement: Executable, params: dict[str, Any] | list[dict[str, Any]], *,
                   write: bool = False) -> list[Any]: ...


@dataclass(frozen=True, slots=True)
class _Candidate:
    item: MemoryItem
    score: float
    recent: bool
    vector: bytes | None


class SqlMemory:
    """Implements the engine's MemoryStore port over the store's connections."""

    def __init__(self, store: Connections, embedder: Embedder | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self._statements: dict[tuple[Where, bool], Executable] = {}
        self._recalls: dict[tuple[str, str | None, str, int], tuple[int, asyncio.Future[list[MemoryItem]]]] = {}
        self._changes: dict[str, int] = {}
        self._locks: dict[str, asyncio.Lock] = {}  # per (agent, channel): `remember` checks and inserts
        self._counts: dict[int, tuple[int, datetime]] = {}  # recalled, not yet written: id -> (times, last)
        self._counted = time.monotonic()
        self._filling: set[int] = set()  # facts whose vectors are being made
        self._backfills: set[asyncio.Task[None]] = set()

    async def settled(self) -> None:
        """Return once the vectors being made in the background are queued for writing."""
        if self._backfills:
            await asyncio.wait(list(self._backfills))

    async def close(self) -> None:
        """Queue the recall counts; stop the vectors still being made (the next recall makes them again)."""
        self.write_counts()
        for task in list(self._backfills):
            task.cancel()
        if self._backfills:
            await asyncio.wait(list(self._backfills))

    # --- recall -------------------------------------------------------------------------------------------
    async def recall(self, agent: str, channel: str | None, query: str, limit: int) -> list[MemoryItem]:
        key = (agent, channel, query, limit)
        while True:
            changes = self._changes.get(agent, 0)
            running = self._recalls.get(key)
            if running is None or running[0] != changes:
                return await self._recall_shared(key, changes)
            try:
                return list(await asyncio.shield(running[1]))
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                # the caller whose read this was is cancelled (its turn stopped): read again, without it

    async def _recall_shared(self, key: tuple[str, str | None, str, int], changes: int) -> list[MemoryItem]:
        """Read in this caller's task; the recalls of the same memories asked meanwhile wait for its answer."""
        answer: asyncio.Future[list[MemoryItem]] = asyncio.get_running_loop().create_future()
        entry = self._recalls[key] = (changes, answer)
        try:
            agent, channel, query, limit = key
            items = await self.search(agent, "shared" if channel is None else "channel", channel, query, limit)
        except BaseException as exc:
            if isinstance(exc, Exception):
                answer.set_exception(exc)
                answer.exception()  # told to those waiting, if any; not logged as unretrieved
            else:
                answer.cancel()
            raise
        finally:
            if self._recalls.get(key) is entry:
                del self._recalls[key]
        answer.set_result(items)
        return list(items)

    async def search(self, agent: str, where: Where, channel: str | None, query: str, limit: int
                     ) -> list[MemoryItem]:
        """The `limit` facts most relevant to `query`, best first (`where`: which channels; see `recall`)."""
        if limit <= 0:
            return []
        words = terms(query)
        embedding = (asyncio.ensure_future(self.embedder.embed([query]))
                     if self.embedder is not None and words else None)
        try:
            candidates = await self._candidates(agent, where, channel, words,
                                                max(limit, CANDIDATES) if embedding else limit)
        except BaseException:
            if embedding is not None:
                embedding.cancel()
            raise
        vectors = await embedding if embedding is not None else None
        if vectors:
            self._backfill([c.item for c in candidates if c.vector is None])
        return self._rank(candidates, pack(vectors[0]) if vectors else None, limit)

    def _backfill(self, items: list[MemoryItem]) -> None:
        """Make the vectors these candidates lack, in the background (this recall ranks them by keywords)."""
        todo = list({i.id: i for i in items if i.id not in self._filling}.values())[:BACKFILL]
        if not todo or self.embedder is None:
            return
        embedder = self.embedder
        self._filling.update(i.id for i in todo)

        async def fill() -> None:
            try:
                vectors = await embedder.embed([i.content for i in todo])
                for item, vector in zip(todo, vectors or [], strict=False):
                    self.store.writes.put(_VECTOR, {"b_id": item.id, "b_vector": pack(vector),
                                                    "b_model": embedder.model})
            finally:
                self._filling.difference_update(i.id for i in todo)

        task = asyncio.get_running_loop().create_task(fill())
        self._backfills.add(task)
        task.add_done_callback(self._backfills.discard)

    async def _candidates(self, agent: str, where: Where, channel: str | None, words: list[str], n: int
                          ) -> list[_Candidate]:
        dialect = self.store.engine.dialect.name
        statement = self._statements.get((where, bool(words)))
        if statement is None:
            statement = self._statements[(where, bool(words))] = _statement(dialect, where, bool(words))
        params: dict[str, Any] = {"agent": agent, "channel": channel, "n": n, "r": n}
        if words:
            params["q"] = fts5_match(words) if dialect == "sqlite" else tsquery(words)
        rows = await self.store.rows(statement, params)
        return [_Candidate(MemoryItem(r.id, r.agent, r.channel, r.content, r.created_at), float(r.score or 0),
                           bool(r.recent), r.embedding if r.embedding_model == self._model() else None)
                for r in rows]

    def _model(self) -> str | None:
        return self.embedder.model if self.embedder is not None else None

    @staticmethod
    def _rank(candidates: list[_Candidate], query: bytes | None, limit: int) -> list[MemoryItem]:
        """Keyword matches by score (with a query vector: fused with the vector ranking), then the newest."""
        matched = sorted((c for c in candidates if not c.recent), key=lambda c: (-c.score, -c.item.id))
        newest = sorted({c.item.id: c for c in candidates if c.recent}.values(), key=lambda c: -c.item.id)
        by_id = {c.item.id: c for c in (*newest, *matched)}
        if query is not None:
            near = sorted(((similarity(query, c.vector), c.item.id) for c in by_id.values() if c.vector),
                          key=lambda s: (-s[0], -s[1]))
            scores = fuse([c.item.id for c in matched], [i for _, i in near])
            order = sorted(scores, key=lambda i: (-scores[i], -i))  # recency breaks ties
        else:
            order = [c.item.id for c in matched]
        found = set(order)
        order += [c.item.id for c in newest if c.item.id not in found]
        return [by_id[i].item for i in order[:limit]]

    def recalled(self, ids: Sequence[int]) -> None:
        now = utcnow()
        for memory_id in ids:
            times, _ = self._counts.get(memory_id, (0, now))
            self._counts[memory_id] = (times + 1, now)
        if self._counts and time.monotonic() - self._counted >= COUNTS_EVERY:
            self.write_counts()

    def write_counts(self) -> None:
        """Queue the recall counts kept so far (the write-behind commits them with the next batch)."""
        self._counted = time.monotonic()
        for params in self._count_params():
            self.store.writes.put(_COUNT, params)

    def _count_params(self) -> list[dict[str, Any]]:
        counts, self._counts = self._counts, {}
        return [{"b_id": i, "b_n": n, "b_at": at} for i, (n, at) in sorted(counts.items())]

    # --- remember and forget ------------------------------------------------------------------------------
    async def remember(self, agent: str, channel: str | None, content: str, session_id: str | None,
                       max_items: int | None = None) -> Remembered:
        """Store the fact, unless the same one is there; a channel that then holds more than `max_items` drops
        its least recalled, oldest facts (never the new one). The INSERT ... WHERE NOT EXISTS, the count and the
        DELETE are one transaction, under a per-(agent, channel) lock in this process and, on PostgreSQL, a
        transaction advisory lock on the same key across instances (SQLite: the INSERT takes the database's
        write lock first): parallel calls neither overfill a channel nor store one fact twice."""
        vector = await self._embed(content)
        t = MEM
        same = [t.c.agent == agent, t.c.channel.is_(None) if channel is None else t.c.channel == channel]
        source = select(bindparam("m_agent", agent, String), bindparam("m_channel", channel, String),
                        bindparam("m_content", content, Text), bindparam("m_session", session_id, String),
                        bindparam("m_at", utcnow(), DateTime(timezone=True)),
                        bindparam("m_vector", vector, LargeBinary),
                        bindparam("m_model", self._model() if vector else None, String))
        source = source.where(~exists().where(*same, t.c.content == content))
        stmt = insert(t).from_select(["agent", "channel", "content", "session_id", "created_at", "embedding",
                                      "embedding_model"], source).returning(t.c.id)
        key = f"memories:{agent}:{channel}"
        lock = self._locks.setdefault(key, asyncio.Lock())
        dropped: MemoryItem | None = None
        async with lock, self.store.engine.begin() as conn:
            if self.store.engine.dialect.name == "postgresql":
                await conn.execute(sql_text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": key})
            new_id = (await conn.execute(stmt)).scalar_one_or_none()
            if new_id is None:
                found = await conn.execute(select(t.c.id).where(*same, t.c.content == content).limit(1))
                return Remembered(int(found.scalar_one()), new=False)
            counts = self._count_params()  # what this process counted decides which fact goes
            if counts:
                await conn.execute(_COUNT, counts)
            if max_items is not None:
                held = (await conn.execute(select(func.count()).select_from(t).where(*same))).scalar_one()
                if held > max_items:
                    victims = (select(t.c.id, t.c.agent, t.c.channel, t.c.content, t.c.created_at)
                               .where(*same, t.c.id != new_id)
                               .order_by(t.c.recalls, func.coalesce(t.c.last_recalled_at, t.c.created_at), t.c.id)
                               .limit(held - max_items))
                    gone = (await conn.execute(victims)).all()
                    await conn.execute(delete(t).where(t.c.id.in_([g.id for g in gone])))
                    dropped = MemoryItem(gone[0].id, gone[0].agent, gone[0].channel, gone[0].content,
                                         gone[0].created_at) if gone else None
        self._changed(agent)  # committed: a recall asked from now on does not share an older one
        return Remembered(int(new_id), dropped=dropped)

    async def _embed(self, content: str) -> bytes | None:
        if self.embedder is None:
            return None
        vectors = await self.embedder.embed([content])
        return pack(vectors[0]) if vectors else None

    async def forget(self, agent: str, memory_id: int, channel: str | None = None) -> MemoryItem | None:
        t = MEM
        conditions = [t.c.id == memory_id, t.c.agent == agent, *([t.c.channel == channel] if channel else [])]
        async with self.store.engine.begin() as conn:
            row = (await conn.execute(delete(t).where(*conditions).returning(
                t.c.id, t.c.agent, t.c.channel, t.c.content, t.c.created_at))).first()
        self._changed(agent)
        return MemoryItem(row.id, row.agent, row.channel, row.content, row.created_at) if row else None

    def _changed(self, agent: str) -> None:
        self._changes[agent] = self._changes.get(agent, 0) + 1

    # --- listing (the CLI) --------------------------------------------------------------------------------
    async def get(self, memory_id: int) -> MemoryItem | None:
        t = MEM
        rows = await self.store.rows(select(t.c.id, t.c.agent, t.c.channel, t.c.content, t.c.created_at)
                                     .where(t.c.id == memory_id), {})
        return MemoryItem(rows[0].id, rows[0].agent, rows[0].channel, rows[0].content, rows[0].created_at) if rows \
            else None

    async def newest(self, agent: str | None, channel: str | None, limit: int) -> list[MemoryItem]:
        """The newest facts, of one agent (None: every agent's) and one channel (None: every channel)."""
        t = MEM
        query = select(t.c.id, t.c.agent, t.c.channel, t.c.content, t.c.created_at).order_by(t.c.id.desc())
        if agent is not None:
            query = query.where(t.c.agent == agent)
        if channel is not None:
            query = query.where(t.c.channel == channel)
        rows = await self.store.rows(query.limit(limit), {})
        return [MemoryItem(r.id, r.agent, r.channel, r.content, r.created_at) for r in rows]
