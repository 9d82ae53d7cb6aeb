"""SqlMemory: the long-term facts (`memories`), recalled by relevance (docs/knowledge.md).

Keywords: SQLite's FTS5 table `memories_fts`, PostgreSQL's tsvector column `search` with its GIN index (migrations
0016, 0020) find the candidates, and BM25 scores them here, the same on both (ranking.py); the queries are built
from the text's words (keywords.py), so no text errors them. A recall is two statements, rarely up to four: how many
facts hold each word, then the candidates and the newest facts (which fill the list when fewer match).
Embeddings (an `Embedder`, YOKEBOT_EMBEDDING_MODEL): the query's vector is compared with the candidates' stored
vectors (vectors.py), and the two rankings are merged by reciprocal rank fusion, recency breaking ties; an
embedding that fails leaves the keywords alone.

A recall that is running is shared by the recalls of the same memories asked meanwhile (a burst in one channel),
never across a `remember` or `forget` of this process. Recall counts (`recalled`) are kept in memory and written
at most once a minute, and before a `remember` decides which fact a full channel drops."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol, cast

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
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import Executable

from bot.engine.ports import Embedder, MemoryItem, Remembered
from bot.store import ranking
from bot.store.keywords import fts5, terms, tsquery
from bot.store.models import MemoryRow, utcnow
from bot.store.nearest import SCOPE, Nearest, Where
from bot.store.vec_postgres import PgVectors
from bot.store.vec_sqlite import SqliteVectors
from bot.store.vectors import fuse, pack, similarity
from bot.store.writer import WriteBehind

log = logging.getLogger(__name__)

MEM = cast(Table, MemoryRow.__table__)
COUNTS_EVERY = 60.0  # seconds between writes of the recall counts
CANDIDATES = 20  # with embeddings: keyword matches and newest facts compared by vector, at least

_COLUMNS = ("m.id, m.agent, m.channel, m.content, m.created_at, m.embedding, m.embedding_model")
# a match's vector is read apart, for the best ones only; its model tells whether it has one (a vector and its model
# are written together: `remember`, _VECTOR)
_MATCHED = ("m.id, m.agent, m.channel, m.content, m.created_at, CAST(NULL AS {blob}) AS embedding, "
            "m.embedding_model")
_TYPES: dict[str, Any] = {"id": BigInteger, "created_at": DateTime(timezone=True), "embedding": LargeBinary,
                          "embedding_model": String, "recent": Integer}
_VECTOR = (update(MEM).where(MEM.c.id == bindparam("b_id"))
           .values(embedding=bindparam("b_vector"), embedding_model=bindparam("b_model")))
BACKFILL = 32  # facts without a vector (stored before embeddings were on, or while they failed) embedded at once
_COUNT = (update(MEM).where(MEM.c.id == bindparam("b_id"))
          .values(recalls=MEM.c.recalls + bindparam("b_n", type_=Integer), last_recalled_at=bindparam("b_at")))
# PostgreSQL: the share of facts holding each of these words, from the planner's statistics of the column
# (read for a word whose count stopped at the budget)
_SHARE = ("SELECT CAST(w.i AS INTEGER) - 1 AS i, (SELECT max(e.freq) FROM pg_stats s CROSS JOIN LATERAL "
          "unnest(CAST(CAST(s.most_common_elems AS text) AS text[]), s.most_common_elem_freqs) AS e(lexeme, freq) "
          "WHERE s.schemaname = current_schema() AND s.tablename = 'memories' AND s.attname = 'search' "
          "AND e.lexeme = ANY(tsvector_to_array(to_tsvector('english', w.word)))) AS freq "
          "FROM unnest(CAST(:words AS text[])) WITH ORDINALITY AS w(word, i)")
# a row of counts in the first statement: no fact (the memory's columns empty)
_NONE = {"sqlite": "NULL AS id, NULL AS agent, NULL AS channel, NULL AS content, NULL AS created_at, "
                   "NULL AS embedding, NULL AS embedding_model, 0 AS recent",
         "postgresql": "CAST(NULL AS bigint) AS id, CAST(NULL AS varchar) AS agent, CAST(NULL AS varchar) AS channel, "
                       "CAST(NULL AS text) AS content, CAST(NULL AS timestamptz) AS created_at, "
                       "CAST(NULL AS bytea) AS embedding, CAST(NULL AS varchar) AS embedding_model, 0 AS recent"}
_COUNTED = {"i": Integer, "held": BigInteger, "freq": Float}
HELD_SECONDS = 60.0  # how long the number of facts holding a word (and of all facts) is kept
# how many facts hold each word (SQLite: FTS5 counts its index; PostgreSQL: counted up to the budget, beyond it
# the planner's statistics of the column, `pg_stats.most_common_elems`; a word those say is held by more facts
# than the budget is not counted: a count reads each fact's row), and how many facts there are
_HELD = {
    "sqlite": ("SELECT {none}, CAST(j.key AS INTEGER) AS i, (SELECT count(*) FROM memories_fts "
               "WHERE memories_fts MATCH j.value) AS held, NULL AS freq FROM json_each(:words) j "
               "UNION ALL SELECT {none}, -1, (SELECT count(*) FROM memories), NULL"),
    "postgresql": (
        "WITH e AS MATERIALIZED (SELECT e.lexeme, e.freq FROM pg_stats s CROSS JOIN LATERAL "
        "unnest(CAST(CAST(s.most_common_elems AS text) AS text[]), s.most_common_elem_freqs) AS e(lexeme, freq) "
        "WHERE s.schemaname = current_schema() AND s.tablename = 'memories' AND s.attname = 'search') "
        "SELECT {none}, CAST(w.i AS INTEGER) - 1 AS i, CASE WHEN f.freq * t.n > CAST(:cap AS bigint) THEN NULL ELSE "
        "(SELECT count(*) FROM (SELECT 1 FROM memories m WHERE m.search @@ to_tsquery('english', w.q) LIMIT :cap) c) "
        "END AS held, f.freq "
        "FROM unnest(CAST(:words AS text[]), CAST(:raw AS text[])) WITH ORDINALITY AS w(q, word, i) "
        "CROSS JOIN (SELECT greatest(c.reltuples, 0) AS n FROM pg_class c "
        "WHERE c.oid = CAST('memories' AS regclass)) t "
        "CROSS JOIN LATERAL (SELECT tsvector_to_array(to_tsvector('english', w.word)) AS lexemes) x "
        "CROSS JOIN LATERAL (SELECT CAST(max(e.freq) AS real) AS freq FROM e WHERE e.lexeme = ANY(x.lexemes)) f "
        "UNION ALL SELECT {none}, -1, CASE WHEN c.reltuples >= 10000 THEN CAST(c.reltuples AS bigint) "
        "ELSE (SELECT count(*) FROM memories) END, NULL FROM pg_class c WHERE c.oid = CAST('memories' AS regclass)"),
}


def _newest(where: Where, counted: bool = False) -> str:
    """The newest facts, each channel filter its own index range (an OR of two would sort the whole channel);
    `counted`: with the empty columns of the counts beside them (`_first`)."""
    extra = ", CAST(NULL AS INTEGER) AS i, CAST(NULL AS BIGINT) AS held, CAST(NULL AS REAL) AS freq" if counted else ""
    one = (f"SELECT {_COLUMNS}, 1 AS recent{extra} FROM memories m "  # noqa: S608
           "WHERE m.agent = :agent{scope} ORDER BY m.id DESC LIMIT :r")
    if where == "channel":
        return (f"SELECT * FROM ({one.format(scope=' AND m.channel = :channel')}) n1 UNION ALL "  # noqa: S608
                f"SELECT * FROM ({one.format(scope=' AND m.channel IS NULL')}) n2")
    return f"SELECT * FROM ({one.format(scope=SCOPE[where])}) n1"  # noqa: S608


def _matching(dialect: str, where: Where, part: int, ranked: bool) -> str:
    """At most :nN facts the index finds for the query :qN. `ranked` (the rare words, a few hundred facts at
    most): the best by those words, SQLite by FTS5's bm25(), PostgreSQL by the IDFs (:iN) of the words (:wN) each
    holds. Else (a group of common words): on SQLite the newest (FTS5 walks its index backwards and stops at the
    limit); on PostgreSQL the first the GIN index gives (ordered, it would read and sort every fact holding them)."""
    if dialect == "sqlite":
        order = "memories_fts.rank" if ranked else "memories_fts.rowid DESC"
        return (f"SELECT * FROM (SELECT {_MATCHED.format(blob='BLOB')}, 0 AS recent "  # noqa: S608
                "FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid "
                f"WHERE memories_fts MATCH :q{part} AND m.agent = :agent{SCOPE[where]} "
                f"ORDER BY {order} LIMIT :n{part}) k{part}")
    order = (f"ORDER BY (SELECT sum(w.idf) FROM w{part} w WHERE m.search @@ w.q) DESC, m.id DESC "  # noqa: S608
             if ranked else "")
    return (f"SELECT * FROM (SELECT {_MATCHED.format(blob='bytea')}, 0 AS recent FROM memories m "  # noqa: S608
            f"WHERE m.search @@ (SELECT to_tsquery('english', CAST(:q{part} AS text))) "
            f"AND m.agent = :agent{SCOPE[where]} {order}LIMIT :n{part}) k{part}")


def _first(dialect: str, where: Where) -> Executable:
    """A recall's first statement: how many facts hold each word (rows without a fact), and the newest facts."""
    counts = _HELD[dialect].format(none=_NONE[dialect])
    return sql_text(f"{counts} UNION ALL {_newest(where, counted=True)}").columns(**_TYPES, **_COUNTED)


def _statement(dialect: str, where: Where, ranked: tuple[bool, ...], newest: bool) -> Executable:
    selects = [_matching(dialect, where, i, r) for i, r in enumerate(ranked)] + ([_newest(where)] if newest else [])
    # PostgreSQL: a ranked part's words as tsqueries, made once for the statement (not once per fact)
    weights = [f"w{i} AS MATERIALIZED (SELECT to_tsquery('english', w.q) AS q, w.idf FROM unnest("  # noqa: S608
               f"CAST(:w{i} AS text[]), CAST(:i{i} AS float8[])) AS w(q, idf))" for i, r in enumerate(ranked) if r]
    head = f"WITH {', '.join(weights)} " if weights and dialect == "postgresql" else ""
    return sql_text(head + " UNION ALL ".join(selects)).columns(**_TYPES)


Part = tuple[list[list[str]], int, dict[str, float] | None]  # OR of ANDs; how many; the words' weights, to rank


class Connections(Protocol):
    """What the memory uses of the store (SqlStore, bot/store/repositories.py)."""

    @property
    def engine(self) -> AsyncEngine: ...
    @property
    def direct(self) -> AsyncEngine: ...  # PostgreSQL behind a pooler: straight to the server (DDL)
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
    vectored: bool  # a vector of the current model is stored (read or not)


class SqlMemory:
    """Implements the engine's MemoryStore port over the store's connections."""

    def __init__(self, store: Connections, embedder: Embedder | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self._statements: dict[tuple[Where, tuple[bool, ...], bool], Executable] = {}
        self._held: dict[str, tuple[int, float]] = {}  # word -> (facts holding it, when counted)
        self._total: tuple[int, float] | None = None  # (facts, when counted)
        self._recalls: dict[tuple[str, str | None, str, int], tuple[int, asyncio.Future[list[MemoryItem]]]] = {}
        self._changes: dict[str, int] = {}
        self._locks: dict[str, asyncio.Lock] = {}  # per (agent, channel): `remember` checks and inserts
        self._counts: dict[int, tuple[int, datetime]] = {}  # recalled, not yet written: id -> (times, last)
        self._counted = time.monotonic()
        self._filling: set[int] = set()  # facts whose vectors are being made
        self._backfills: set[asyncio.Task[None]] = set()
        self.index: Nearest | None = None  # the database's vector index, when it has one (`open_index`)

    async def open_index(self) -> Nearest | None:
        """With embeddings on: the database's vector index, if its extension is there (pgvector, sqlite-vec);
        else the candidates' vectors are compared here (nearest.py)."""
        if self.embedder is None:
            return None
        try:
            if self.store.engine.dialect.name == "postgresql":
                self.index = await PgVectors.open(self.store.engine, self.store.direct)
            elif self.store.engine.dialect.name == "sqlite":
                self.index = await SqliteVectors.open(self.store.engine, self.embedder.model)
        except (OSError, SQLAlchemyError) as exc:  # never the start's failure: recall goes on without it
            log.warning("memory recall by vector: the vector index could not be opened (%s); the keyword "
                        "matches' vectors are compared instead", str(exc).splitlines()[0])
            return None
        if self.index is not None:
            log.info("memory recall by vector: %s", self.index.name)
            self.index.changed()  # the facts stored before (or by another instance): into the index
        return self.index

    async def settled(self) -> None:
        """Return once the vectors being made in the background are queued for writing."""
        if self._backfills:
            await asyncio.wait(list(self._backfills))
        if self.index is not None:
            await self.index.settled()

    async def close(self) -> None:
        """Queue the recall counts; stop the vectors still being made (the next recall makes them again)."""
        self.write_counts()
        if self.index is not None:
            await self.index.close()
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
        embedded = self.embedder is not None and bool(words)
        n = max(limit, CANDIDATES) if embedded else limit
        # the query's vector (and, with an index, the facts nearest it) found while the keywords are read
        nearby = asyncio.ensure_future(self._nearby(agent, where, channel, query, n)) if embedded else None
        try:
            candidates = await self._candidates(agent, where, channel, words, n)
        except BaseException:
            if nearby is not None:
                nearby.cancel()
            raise
        query_vector, near = await nearby if nearby is not None else (None, None)
        if query_vector is None:
            return self._rank(candidates, None, limit)
        if near is not None:  # the candidates' vectors were not read: those they lack are made
            self._backfill([c.item for c in candidates if not c.vectored])
        else:  # no index, or it cannot answer yet: the candidates' vectors, and those they lack made
            if self.index is not None:  # not read with the candidates: the index was expected to answer
                found = await self._vectors([c.item.id for c in candidates if not c.recent])
                candidates = [replace(c, vector=found[c.item.id]) if c.item.id in found else c for c in candidates]
            self._backfill([c.item for c in candidates if c.vector is None])
        return self._rank(candidates, query_vector, limit, near)

    async def _nearby(self, agent: str, where: Where, channel: str | None, query: str, k: int
                      ) -> tuple[bytes | None, list[tuple[MemoryItem, float]] | None]:
        """The query's packed vector (None: embeddings failed), and the index's `k` facts nearest it (None: no
        index, or it could not answer; a database error there is logged, the keywords go on)."""
        if self.embedder is None:
            return None, None
        vectors = await self.embedder.embed([query])
        if not vectors:
            return None, None
        packed = pack(vectors[0])
        if self.index is None:
            return packed, None
        try:
            return packed, await self.index.nearest(agent, where, channel, self.embedder.model, packed, k)
        except (OSError, SQLAlchemyError) as exc:
            log.warning("memory recall by vector: the index failed (%s); this recall compares the keyword "
                        "matches' vectors", str(exc).splitlines()[0])
            return packed, None

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
                if vectors and self.index is not None:
                    await self.store.writes.flush()  # committed, then indexed
                    self.index.changed()
            finally:
                self._filling.difference_update(i.id for i in todo)

        task = asyncio.get_running_loop().create_task(fill())
        self._backfills.add(task)
        task.add_done_callback(self._backfills.discard)

    async def _candidates(self, agent: str, where: Where, channel: str | None, words: list[str], n: int
                          ) -> list[_Candidate]:
        """The best `n` keyword matches, scored (ranking.py), and the `n` newest facts."""
        base: dict[str, Any] = {"agent": agent, "channel": channel, "r": n}
        if not words:
            return self._candidates_of(await self._read(where, [], True, base))
        now = time.monotonic()
        counts, todo = self._known(words, now)
        newest: list[Any] | None = None  # read with the candidates when every count is known
        if todo or self._total is None or now - self._total[1] >= HELD_SECONDS:
            first = self._statements.get((where, (), False))
            if first is None:
                first = self._statements[(where, (), False)] = _first(self.store.engine.dialect.name, where)
            rows = await self.store.rows(first, base | self._words_params(todo))
            newest = [r for r in rows if r.id is not None]
            total = await self._read_counts(todo, [r for r in rows if r.id is None], counts, now)
        else:
            total = self._total[0]
        if total == 0:  # no fact at all when counted (a `remember` here counts again): the newest facts are all
            # there is to find, in one read of them as before the ranking (the hot path of a memory not used yet)
            return self._candidates_of(newest if newest is not None else await self._read(where, [], True, base))
        planned = ranking.plan(words, counts, total)
        if planned is None:
            return self._candidates_of(newest or [])
        rare = {w: planned.weights[ranking.stem(w)] for w in planned.rare}
        parts: list[Part] = []
        if planned.rare:  # every word rare: FTS5's bm25() is this BM25, its best `n` are the answer; PostgreSQL's
            # order by the words' IDFs alone leaves ties (tf, length) that the scoring here breaks
            exact = n if self.store.engine.dialect.name == "sqlite" else ranking.tied(n)
            parts.append(([[w] for w in planned.rare], ranking.grouped(n) if planned.common else exact, rare))
        if planned.common:
            parts.append(([planned.common], ranking.grouped(n), None))
        rows = await self._read(where, parts, newest is None, base)
        if newest is None:
            newest = [r for r in rows if r.recent]
            rows = [r for r in rows if not r.recent]
        texts = {r.id: (r, ranking.tokens(r.content)) for r in rows}
        average = (sum(len(t) for _, t in texts.values()) / len(texts)) if texts else 1.0
        scored = {i: (r, planned.score(t, average)) for i, (r, t) in texts.items()}
        held, reads = len(planned.common), 1
        while reads < ranking.ROUNDS and held > 1 and not planned.settled(
                (sc for _, sc in scored.values()), n, held - 1):
            held -= 1
            groups = planned.groups(held)
            if groups is None:
                break
            for r in await self._read(where, [(groups, ranking.grouped(n), None)], False, base):
                if r.id not in scored:
                    scored[r.id] = (r, planned.score(ranking.tokens(r.content), average))
            reads += 1
        best = sorted(scored.values(), key=lambda s: (-s[1], -s[0].id))[:n]
        vectors = await self._vectors([r.id for r, _ in best]) if self.index is None else {}
        # a match the database found but the scoring did not (another stemmer) keeps a little score
        return [self._candidate(r, max(sc, 1e-9), False, vectors.get(r.id)) for r, sc in best] + \
            self._candidates_of(newest)

    async def _read(self, where: Where, parts: list[Part], newest: bool, base: dict[str, Any]) -> list[Any]:
        """The facts each part's groups find (an OR of ANDs; at most the part's number: the best by its words'
        weights when it has them, else the newest), and the newest facts if asked."""
        dialect = self.store.engine.dialect.name
        key = (where, tuple(weights is not None for _, _, weights in parts), newest)
        statement = self._statements.get(key)
        if statement is None:
            statement = self._statements[key] = _statement(dialect, where, key[1], newest)
        params = dict(base)
        for i, (groups, most, weights) in enumerate(parts):
            params[f"q{i}"] = fts5(groups) if dialect == "sqlite" else tsquery(groups)
            params[f"n{i}"] = most
            if weights is not None and dialect != "sqlite":
                params[f"w{i}"] = [tsquery([[w]]) for w in weights]
                params[f"i{i}"] = list(weights.values())
        return await self.store.rows(statement, params)

    async def _vectors(self, ids: list[int]) -> dict[int, bytes]:
        """The stored vectors of these facts made by the current model (read for the best matches only: a
        vector is kilobytes)."""
        model = self._model()
        if model is None or not ids:
            return {}
        rows = await self.store.rows(select(MEM.c.id, MEM.c.embedding).where(
            MEM.c.id.in_(ids), MEM.c.embedding_model == model, MEM.c.embedding.is_not(None)), {})
        return {int(r.id): bytes(r.embedding) for r in rows}

    def _candidate(self, r: Any, score: float, recent: bool, vector: bytes | None) -> _Candidate:
        vectored = vector is not None or (r.embedding_model is not None and r.embedding_model == self._model())
        return _Candidate(MemoryItem(r.id, r.agent, r.channel, r.content, r.created_at), score, recent, vector,
                          vectored)

    def _candidates_of(self, newest: list[Any]) -> list[_Candidate]:
        model = self._model()
        return [self._candidate(r, 0.0, True, r.embedding if r.embedding_model == model else None) for r in newest]

    def _known(self, words: list[str], now: float) -> tuple[dict[str, int], list[str]]:
        """The counts of the words counted less than HELD_SECONDS ago (counting costs a read of the facts holding
        the word; its weight barely moves meanwhile), and the words to count. A word no fact held is still searched
        for (ranking.plan): a fact remembered since is found."""
        counts = {w: c for w in words if (c := self._held.get(w)) is not None and now - c[1] < HELD_SECONDS}
        return {w: c for w, (c, _) in counts.items()}, [w for w in words if w not in counts]

    def _words_params(self, todo: list[str]) -> dict[str, Any]:
        if self.store.engine.dialect.name == "sqlite":
            return {"words": json.dumps([fts5([[w]]) for w in todo])}
        return {"words": [tsquery([[w]]) for w in todo], "raw": todo, "cap": ranking.BUDGET + 1}

    async def _read_counts(self, todo: list[str], rows: list[Any], counts: dict[str, int], now: float) -> int:
        """Read the counts' rows into `counts` (PostgreSQL counts up to the budget: the column's statistics say
        how many more); the number of facts."""
        total = next(int(r.held) for r in rows if r.i == -1)
        capped: list[str] = []
        for r in rows:
            if r.i >= 0:
                word = todo[int(r.i)]
                if r.held is None:  # the statistics say it is common: not counted (PostgreSQL)
                    counts[word] = max(ranking.BUDGET + 1, round((r.freq or 0.0) * total))
                    continue
                counts[word] = int(r.held)
                if counts[word] > ranking.BUDGET:
                    capped.append(word)
        if capped and self.store.engine.dialect.name == "postgresql":
            for r in await self.store.rows(sql_text(_SHARE), {"words": capped}):
                word = capped[int(r.i)]
                counts[word] = max(counts[word], round((r.freq or 0.0) * total))
        for word in todo:
            self._held[word] = (counts[word], now)
        self._total = (total, now)
        if len(self._held) > 10_000:
            self._held = {w: c for w, c in self._held.items() if now - c[1] < HELD_SECONDS}
        return total

    def _model(self) -> str | None:
        return self.embedder.model if self.embedder is not None else None

    @staticmethod
    def _rank(candidates: list[_Candidate], query: bytes | None, limit: int,
              nearest: list[tuple[MemoryItem, float]] | None = None) -> list[MemoryItem]:
        """Keyword matches by score (with a query vector: fused with the vector ranking, the index's `nearest`
        when it answered, else the candidates' vectors compared here), then the newest."""
        matched = sorted((c for c in candidates if not c.recent), key=lambda c: (-c.score, -c.item.id))
        newest = sorted({c.item.id: c for c in candidates if c.recent}.values(), key=lambda c: -c.item.id)
        by_id = {c.item.id: c for c in (*newest, *matched)}
        if nearest is not None:
            for item, _ in nearest:
                by_id.setdefault(item.id, _Candidate(item, 0.0, False, None, True))
            near = sorted(((sim, item.id) for item, sim in nearest), key=lambda s: (-s[0], -s[1]))
        elif query is not None:
            near = sorted(((similarity(query, c.vector), c.item.id) for c in by_id.values() if c.vector),
                          key=lambda s: (-s[0], -s[1]))
        else:
            near = None
        if near is not None:
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
        if self.index is not None and (vector is not None or dropped is not None):
            self.index.changed()
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
        if self.index is not None and row is not None:
            self.index.changed()
        return MemoryItem(row.id, row.agent, row.channel, row.content, row.created_at) if row else None

    def _changed(self, agent: str) -> None:
        self._changes[agent] = self._changes.get(agent, 0) + 1
        if self._total is not None and self._total[0] == 0:
            self._total = None  # the next recall counts again: it searches the memory now held

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
