"""pgvector: the memories' vectors searched by the database (nearest.py), when the server has the `vector`
extension (docs/knowledge.md).

At start (`PgVectors.open`) the extension is created if the server offers it and this role may (else one log line
says why, and recall compares the keyword candidates' vectors instead), and `memories` gains the column `vec`
(type `vector`, any dimension) and a trigger that empties it when `embedding` changes (another model's vector).
These are made here, not by a migration: the extension can be installed after the schema is, and a server without
it must still migrate (env.py keeps them out of `alembic check`).

`vec` is filled from `embedding` (the packed float32s every database keeps) in the background, told by the memory
that vectors were stored (`changed`). A search asks the vectors of the query's dimension: an HNSW index per
dimension (cosine), a partial expression index `CAST(vec AS halfvec(N)) ... WHERE vector_dims(vec) = N` (half
precision: half the size, and up to 4,000 dimensions where full precision stops at 2,000; pgvector 0.7), made
concurrently the first time a dimension is searched; until it is valid the search is exact (a scan). The index
filters by agent and channel after its walk: pgvector 0.8's iterative scan goes on walking until k facts pass."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.engine.ports import MemoryItem
from bot.store.nearest import SCOPE, Where
from bot.store.vectors import unpack

log = logging.getLogger(__name__)

FILL_BATCH = 500  # facts whose `vec` is written in one statement
_LOCK = "SELECT pg_advisory_lock(hashtext('yokebot:memories:vec'))"  # the DDL of two starting instances, in turn
_UNLOCK = "SELECT pg_advisory_unlock(hashtext('yokebot:memories:vec'))"
_SETUP = (
    "ALTER TABLE memories ADD COLUMN IF NOT EXISTS vec vector",
    # the facts whose `vec` is still to fill, found without reading the table
    "CREATE INDEX IF NOT EXISTS ix_memories_vec_todo ON memories (id) WHERE vec IS NULL AND embedding IS NOT NULL",
    "CREATE OR REPLACE FUNCTION yokebot_memories_vec_stale() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN NEW.vec := NULL; RETURN NEW; END $$",
    "DROP TRIGGER IF EXISTS memories_vec_stale ON memories",
    "CREATE TRIGGER memories_vec_stale BEFORE UPDATE OF embedding ON memories FOR EACH ROW "
    "WHEN (NEW.embedding IS DISTINCT FROM OLD.embedding) EXECUTE FUNCTION yokebot_memories_vec_stale()",
)
_TODO = text("SELECT id, embedding FROM memories WHERE vec IS NULL AND embedding IS NOT NULL ORDER BY id LIMIT :n")
# the `embedding` read is the one written: a vector stored meanwhile emptied `vec` again (the trigger)
_FILL = text("UPDATE memories SET vec = CAST(:v AS vector) WHERE id = :id AND embedding = :e")
_VALID = text("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(:name)")


def literal(packed: bytes) -> str:
    """A packed vector as pgvector's text form, `[x,y,...]` (repr: a float32 read back exactly)."""
    return "[" + ",".join(map(repr, unpack(packed))) + "]"


def _version(text_version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text_version.split(".") if p.isdigit())


class PgVectors:
    """Implements nearest.Nearest over pgvector."""

    def __init__(self, engine: AsyncEngine, direct: AsyncEngine, version: str) -> None:
        self.engine, self.direct, self.version = engine, direct, version
        self.iterative = _version(version) >= (0, 8)  # hnsw.iterative_scan
        # the index holds half-precision copies (0.7 and newer): half the size, models of up to 4,000 dimensions
        self.type, self.most = ("halfvec", 4000) if _version(version) >= (0, 7) else ("vector", 2000)
        self._statements: dict[tuple[Where, int], Any] = {}
        self._indexes: dict[int, asyncio.Task[None] | None] = {}  # dimension -> its index being made (None: made)
        self._filling: asyncio.Task[None] | None = None
        self._again = False

    @property
    def name(self) -> str:
        return f"pgvector {self.version} (hnsw)"

    @classmethod
    async def open(cls, engine: AsyncEngine, direct: AsyncEngine) -> PgVectors | None:
        """The index, with the extension made if the server has it (None, said once in the log, if not)."""
        autocommit = direct.execution_options(isolation_level="AUTOCOMMIT")
        async with autocommit.connect() as conn:
            version = (await conn.execute(text(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"))).scalar_one_or_none()
            if version is None:
                offered = (await conn.execute(text(
                    "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"))).scalar_one_or_none()
                if offered is None:
                    log.info("memory recall by vector: the PostgreSQL server has no pgvector (extension `vector`); "
                             "the keyword matches' vectors are compared instead")
                    return None
                try:
                    await conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
                except DBAPIError as exc:
                    log.warning("memory recall by vector: could not create the extension `vector` (%s); a superuser "
                                "can (`CREATE EXTENSION vector;`); the keyword matches' vectors are compared instead",
                                str(exc.orig).splitlines()[0])
                    return None
                version = str(offered)
            if _version(str(version)) < (0, 5):
                log.warning("memory recall by vector: pgvector %s has no HNSW index (0.5 or newer has); the keyword "
                            "matches' vectors are compared instead", version)
                return None
            await conn.execute(text(_LOCK))
            try:
                for statement in _SETUP:
                    await conn.execute(text(statement))
            finally:
                await conn.execute(text(_UNLOCK))
        return cls(engine, direct, str(version))

    # --- search -------------------------------------------------------------------------------------------
    async def nearest(self, agent: str, where: Where, channel: str | None, model: str, query: bytes, k: int
                      ) -> list[tuple[MemoryItem, float]] | None:
        dims = len(query) // 4
        if dims == 0 or dims > self.most:  # more than HNSW indexes
            return None
        if dims not in self._indexes:
            self._make_index(dims)
        statement = self._statements.get((where, dims))
        if statement is None:
            distance = f"CAST(m.vec AS {self.type}({dims})) <=> CAST(:q AS {self.type}({dims}))"
            statement = self._statements[(where, dims)] = text(
                f"SELECT m.id, m.agent, m.channel, m.content, m.created_at, {distance} AS distance "  # noqa: S608
                f"FROM memories m WHERE vector_dims(m.vec) = {dims} AND m.agent = :agent{SCOPE[where]} "
                f"AND m.embedding_model = :model ORDER BY {distance} LIMIT :k")
        params = {"q": literal(query), "agent": agent, "channel": channel, "model": model, "k": k}
        async with self.engine.begin() as conn:
            if self.iterative:
                await conn.execute(text("SET LOCAL hnsw.iterative_scan = relaxed_order"))
            rows = (await conn.execute(statement, params)).all()
        found = [(MemoryItem(r.id, r.agent, r.channel, r.content, r.created_at), 1.0 - float(r.distance))
                 for r in rows]
        return sorted(found, key=lambda f: (-f[1], -f[0].id))  # relaxed order: near, not exactly sorted

    def _make_index(self, dims: int) -> None:
        """The HNSW index of this dimension, made concurrently in the background (exact scans meanwhile)."""
        self._indexes[dims] = asyncio.get_running_loop().create_task(self._index(dims))

    async def _index(self, dims: int) -> None:
        name = f"ix_memories_vec_{'h' if self.type == 'halfvec' else ''}{dims}"
        try:
            async with self.direct.execution_options(isolation_level="AUTOCOMMIT").connect() as conn:
                valid = (await conn.execute(_VALID, {"name": name})).scalar_one_or_none()
                if valid is False:  # a build that failed (or another instance's, running): made again
                    log.info("memory recall by vector: the index %s is not valid; making it again", name)
                    await conn.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"))
                if valid is not True:
                    log.info("memory recall by vector: making the HNSW index %s (searches are exact meanwhile)", name)
                    await conn.execute(text(
                        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON memories USING hnsw "
                        f"((CAST(vec AS {self.type}({dims}))) {self.type}_cosine_ops) WHERE vector_dims(vec) = {dims}"))
        except DBAPIError as exc:
            log.warning("memory recall by vector: could not make the index %s (%s); searches stay exact", name,
                        str(exc.orig).splitlines()[0])
        finally:
            self._indexes[dims] = None

    # --- keeping up ---------------------------------------------------------------------------------------
    def changed(self) -> None:
        if self._filling is not None and not self._filling.done():
            self._again = True
            return
        self._filling = asyncio.get_running_loop().create_task(self._fill())

    async def _fill(self) -> None:
        """Write `vec` for the facts whose vector is stored and not yet in it, a batch at a time."""
        while True:
            self._again = False
            try:
                async with self.direct.begin() as conn:
                    rows = (await conn.execute(_TODO, {"n": FILL_BATCH})).all()
                    if rows:
                        await conn.execute(_FILL, [{"v": literal(bytes(r.embedding)), "id": r.id,
                                                    "e": r.embedding} for r in rows])
            except DBAPIError as exc:  # the database away: the next change tries again
                log.warning("memory recall by vector: could not index stored vectors (%s)",
                            str(exc.orig).splitlines()[0])
                return
            if len(rows) < FILL_BATCH and not self._again:
                return

    async def settled(self) -> None:
        """Return once the vectors stored so far are in `vec` and the indexes asked for are made (tests)."""
        while self._filling is not None and not self._filling.done():
            await self._filling
        await asyncio.gather(*(t for t in self._indexes.values() if t is not None))

    async def close(self) -> None:
        for task in (self._filling, *self._indexes.values()):
            if task is not None:
                task.cancel()
        await asyncio.gather(*(t for t in (self._filling, *self._indexes.values()) if t is not None),
                             return_exceptions=True)
