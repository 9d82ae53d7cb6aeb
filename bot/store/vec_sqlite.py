"""sqlite-vec: the memories' vectors searched by SQLite (nearest.py), when the package `sqlite-vec` is installed
(`pip install 'yokebot[vectors]'`) and this Python's sqlite3 can load extensions (docs/knowledge.md). Else one log
line at start says which is missing, and recall compares the keyword candidates' vectors instead.

The vectors of the embedding model in use are copied from `memories.embedding` (little-endian float32s: the BLOB
form sqlite-vec reads) into a vec0 table per dimension, `memories_vec_<dims>_<model's tag>` (cosine distance; the
agent its partition key, so a search scans that agent's facts only; the channel a metadata column, '' for a shared
fact, filtered during the scan, so a search returns k facts of its scope). vec0 is an exact search: every vector of
the agent is compared.

What to copy is queued by triggers on `memories` into the plain table `memories_vec_queue`: a fact stored with a
vector, given one later (the backfill's UPDATE, whatever its id), or deleted. The triggers name no vec0 table: a
connection without the extension (the CLI on another Python) still stores and deletes facts; the queue waits for
the next process that has it. Told that vectors changed (`changed`), the index takes the queue in batches, each in
one write transaction: the ids' rows are removed from the vec0 tables and copied again from `memories` if they still
hold a vector of the model. Facts whose vectors predate the triggers (or a table another model's process dropped)
are queued all at once at start. The vec0 tables and the queue are made here, at run time, not by a migration
(env.py keeps them out of `alembic check`).

Its own two SQLite connections, each on its own thread: a search never waits for the store's writer thread, and
the copying never holds it up."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import DateTime
from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.engine.ports import MemoryItem
from bot.store.db import sqlite_pragmas
from bot.store.nearest import Where

log = logging.getLogger(__name__)

T = TypeVar("T")
BATCH = 500  # queued facts copied in one write transaction
# a vec0 chunk holds this many vectors, its blob made whole when the first goes in: a small agent's partition
# then costs 256 vectors' room (1.5 MB at 1,536 dimensions), not vec0's default 1,024
CHUNK = 256
# vec0 searches exactly (every vector of the agent): an agent whose facts times their dimensions pass this is left
# to the keyword candidates' vectors, so a recall stays within its 20 ms (20,000 facts at 256 dimensions took
# about 7 ms a search here, 3,300 at 1,536 the same); the facts are counted at most once a minute
SCAN_BUDGET = 20_000 * 256
COUNTED_SECONDS = 60.0
MAPPED = 1 << 30  # bytes of the file a search reads through mmap (address space, not memory)
PREFIX = "memories_vec_"
_SETUP = (
    "CREATE TABLE IF NOT EXISTS memories_vec_queue (id INTEGER PRIMARY KEY)",
    "CREATE TRIGGER IF NOT EXISTS memories_vec_queue_stored AFTER INSERT ON memories WHEN NEW.embedding IS NOT NULL "
    "BEGIN INSERT OR IGNORE INTO memories_vec_queue (id) VALUES (NEW.id); END",
    "CREATE TRIGGER IF NOT EXISTS memories_vec_queue_restored AFTER UPDATE OF embedding, embedding_model ON memories "
    "BEGIN INSERT OR IGNORE INTO memories_vec_queue (id) VALUES (NEW.id); END",
    "CREATE TRIGGER IF NOT EXISTS memories_vec_queue_deleted AFTER DELETE ON memories "
    "BEGIN INSERT OR IGNORE INTO memories_vec_queue (id) VALUES (OLD.id); END",
)
_TRIGGERS = {"memories_vec_queue_stored", "memories_vec_queue_restored", "memories_vec_queue_deleted"}
_DIALECT = sqlite.dialect()
_WHEN: Callable[[Any], datetime | None] = DateTime(timezone=True).dialect_impl(_DIALECT).result_processor(
    _DIALECT, None)  # pyright: ignore[reportAssignmentType]
# the channel metadata's filter per scope (vec0 metadata has no NULL: a shared fact's channel is '')
_CHANNEL: dict[Where, str] = {"channel": " AND v.channel IN ('', :channel)", "shared": " AND v.channel = ''",
                              "any": ""}


def tag(model: str) -> str:
    """The model's part of its tables' names (a model's name may hold any character)."""
    return hashlib.sha256(model.encode()).hexdigest()[:8]


LOADABLE = hasattr(sqlite3.Connection, "enable_load_extension")  # False where Python was built without them
NOT_INSTALLED = "sqlite-vec is not installed (pip install 'yokebot[vectors]')"
NOT_LOADABLE = ("this Python's sqlite3 cannot load extensions (built without them, as pyenv builds by default; "
                "Debian's python3, python.org's and the official Docker images' can)")


def why_not() -> str | None:
    """Why sqlite-vec cannot be used by this Python, or None."""
    try:
        import sqlite_vec  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        return NOT_INSTALLED
    return None if LOADABLE else NOT_LOADABLE


def connect(path: str, mapped: bool = False) -> sqlite3.Connection:
    """A connection to the database file with sqlite-vec loaded (in autocommit: transactions are begun here).
    `mapped`: the file read through mmap (a search reads every vector of the agent; through SQLite's page cache,
    which holds 2 MB, each page is copied from the OS's: twice the time)."""
    import sqlite_vec

    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        sqlite_pragmas(conn, None)
        if mapped:
            conn.execute(f"PRAGMA mmap_size={MAPPED}")
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
    except BaseException:
        conn.close()
        raise
    return conn


class SqliteVectors:
    """Implements nearest.Nearest over sqlite-vec's vec0 tables."""

    def __init__(self, path: str, model: str, version: str) -> None:
        self.path, self.model, self.version = path, model, version
        self._tag = tag(model)
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="yokebot-vec-read")
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="yokebot-vec-write")
        self._conns: dict[str, sqlite3.Connection] = {}  # "read" / "write": one per thread, made there
        self._tables: set[int] = set()  # the dimensions that have a table of this model
        self._ready = False  # the queue found at start is taken: a search answers
        self._filling: asyncio.Task[None] | None = None
        self._again = False
        self._facts: dict[str, tuple[int, float]] = {}  # agent -> (facts, when counted)
        self._over: set[tuple[str, int]] = set()  # (agent, dimensions) said in the log to be past the budget

    @property
    def name(self) -> str:
        return f"sqlite-vec {self.version} (vec0, exact)"

    @classmethod
    async def open(cls, engine: AsyncEngine, model: str) -> SqliteVectors | None:
        """The index over this database file for this model; None (said once in the log) where sqlite-vec cannot
        be used."""
        database = engine.url.database
        why = why_not()
        if why is None and database in (None, "", ":memory:"):
            why = "the SQLite database is in memory"
        if why is not None:
            log.info("memory recall by vector: %s; the keyword matches' vectors are compared instead", why)
            return None
        index = cls(str(database), model, "")
        try:
            index.version = await index._run(index._writer, "write", index._setup)
        except (OSError, sqlite3.Error) as exc:  # an extension this SQLite cannot load, the file locked too long
            log.warning("memory recall by vector: sqlite-vec could not be used (%s); the keyword matches' vectors "
                        "are compared instead", exc)
            await index.close()
            return None
        except BaseException:
            await index.close()
            raise
        return index

    def _setup(self, conn: sqlite3.Connection) -> str:
        """Make the queue and its triggers, drop the tables of other models, queue every fact with a vector when
        this model has no table yet or the triggers were missing (a migration that made `memories` again)."""
        version = str(conn.execute("SELECT vec_version()").fetchone()[0]).lstrip("v")
        conn.execute("BEGIN IMMEDIATE")
        try:
            triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                                   "AND tbl_name = 'memories'")}
            for statement in _SETUP:
                conn.execute(statement)
            for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ? "
                                         "AND sql LIKE 'CREATE VIRTUAL TABLE%'", (PREFIX + "%",)).fetchall():
                dims, _, owner = table.removeprefix(PREFIX).partition("_")
                if owner == self._tag and dims.isdigit() and _TRIGGERS <= triggers:
                    self._tables.add(int(dims))
                else:  # another model's vectors (not comparable), or missed changes: made again
                    conn.execute(f'DROP TABLE "{table}"')
            if not self._tables:
                conn.execute("INSERT OR IGNORE INTO memories_vec_queue (id) SELECT id FROM memories "
                             "WHERE embedding IS NOT NULL")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return version

    # --- search -------------------------------------------------------------------------------------------
    async def nearest(self, agent: str, where: Where, channel: str | None, model: str, query: bytes, k: int
                      ) -> list[tuple[MemoryItem, float]] | None:
        dims = len(query) // 4
        if not self._ready or model != self.model or dims not in self._tables or k <= 0:
            return None
        if await self._past_budget(agent, dims):
            return None
        scope = "shared" if where == "channel" and channel is None else where
        sql = (f"SELECT m.id, m.agent, m.channel, m.content, m.created_at, v.distance "  # noqa: S608
               f'FROM "{self._table(dims)}" v '
               f"JOIN memories m ON m.id = v.rowid WHERE v.embedding MATCH :q AND v.k = :n AND v.agent = :agent"
               f"{_CHANNEL[scope]} AND m.embedding_model = :model ORDER BY v.distance")
        # a fact deleted since the queue was last taken is still in vec0: the join drops it, a few more fill in
        params = {"q": query, "n": k + 8, "agent": agent, "channel": channel, "model": model}
        try:
            rows = await self._run(self._reader, "read", lambda conn: conn.execute(sql, params).fetchall())
        except sqlite3.Error as exc:  # the table dropped by another process, the file away: the candidates' vectors
            log.warning("memory recall by vector: sqlite-vec's search failed (%s); this recall compares the keyword "
                        "matches' vectors", exc)
            return None
        found = [(MemoryItem(r[0], r[1], r[2], r[3], _WHEN(r[4])), 1.0 - float(r[5]))  # type: ignore[arg-type]
                 for r in rows]
        return sorted(found, key=lambda f: (-f[1], -f[0].id))[:k]

    async def _past_budget(self, agent: str, dims: int) -> bool:
        """Whether the agent holds too many facts for an exact search of this dimension (said once per agent)."""
        counted = self._facts.get(agent)
        if counted is None or time.monotonic() - counted[1] >= COUNTED_SECONDS:
            try:  # the agent's facts through the (agent, channel) index: a few ms over 100,000
                held = await self._run(self._reader, "read", lambda conn: int(conn.execute(
                    "SELECT count(*) FROM memories WHERE agent = ?", (agent,)).fetchone()[0]))
            except sqlite3.Error:
                return True
            counted = self._facts[agent] = (held, time.monotonic())
        if counted[0] * dims <= SCAN_BUDGET:
            self._over.discard((agent, dims))
            return False
        if (agent, dims) not in self._over:
            self._over.add((agent, dims))
            log.info("memory recall by vector: agent %r holds %d facts, more than sqlite-vec searches within a "
                     "recall's time at %d dimensions (%d); its recalls compare the keyword matches' vectors "
                     "(PostgreSQL with pgvector indexes any number)", agent, counted[0], dims, SCAN_BUDGET // dims)
        return True

    def _table(self, dims: int) -> str:
        return f"{PREFIX}{dims}_{self._tag}"

    # --- keeping up ---------------------------------------------------------------------------------------
    def changed(self) -> None:
        if self._filling is not None and not self._filling.done():
            self._again = True
            return
        self._filling = asyncio.get_running_loop().create_task(self._fill())

    async def _fill(self) -> None:
        """Take the queue, a batch at a time, until it is empty."""
        while True:
            self._again = False
            try:
                more = await self._run(self._writer, "write", self._take)
            except sqlite3.Error as exc:  # the file locked for longer than the busy timeout: the next change
                log.warning("memory recall by vector: could not index stored vectors (%s)", exc)
                return
            if not more:
                self._ready = True
                if not self._again:
                    return

    def _take(self, conn: sqlite3.Connection) -> bool:
        """Copy one batch of the queued facts (removed from the vec0 tables, copied again if they still hold a
        vector of the model); whether more are queued."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            ids = [r[0] for r in conn.execute("SELECT id FROM memories_vec_queue ORDER BY id LIMIT ?", (BATCH,))]
            if ids:
                marks = ",".join("?" * len(ids))
                for dims in self._tables:
                    conn.execute(f'DELETE FROM "{self._table(dims)}" WHERE rowid IN ({marks})', ids)  # noqa: S608
                rows = conn.execute(f"SELECT id, agent, coalesce(channel, ''), embedding FROM memories "  # noqa: S608
                                    f"WHERE id IN ({marks}) AND embedding_model = ? AND embedding IS NOT NULL",
                                    [*ids, self.model]).fetchall()
                for row in rows:
                    dims = len(row[3]) // 4
                    if dims == 0 or len(row[3]) % 4:
                        continue
                    if dims not in self._tables:
                        conn.execute(f'CREATE VIRTUAL TABLE IF NOT EXISTS "{self._table(dims)}" USING vec0('
                                     f"agent text partition key, channel text, "
                                     f"embedding float[{dims}] distance_metric=cosine, chunk_size={CHUNK})")
                        self._tables.add(dims)
                    conn.execute(f'INSERT INTO "{self._table(dims)}" (rowid, agent, channel, embedding) '  # noqa: S608
                                 "VALUES (?, ?, ?, ?)", row)
                conn.execute(f"DELETE FROM memories_vec_queue WHERE id IN ({marks})", ids)  # noqa: S608
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            self._tables = {d for d in self._tables if self._exists(conn, d)}  # one made in the rolled back batch
            raise
        return len(ids) == BATCH

    def _exists(self, conn: sqlite3.Connection, dims: int) -> bool:
        return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (self._table(dims),)).fetchone() is not None

    async def settled(self) -> None:
        """Return once the facts queued so far are in the index (tests, the CLI before it exits)."""
        while self._filling is not None and not self._filling.done():
            await self._filling

    async def close(self) -> None:
        if self._filling is not None:
            self._filling.cancel()
            await asyncio.gather(self._filling, return_exceptions=True)
        loop = asyncio.get_running_loop()
        for role, pool in (("read", self._reader), ("write", self._writer)):
            await loop.run_in_executor(pool, self._disconnect, role)  # after what that thread still runs
            pool.shutdown(wait=False)

    def _disconnect(self, role: str) -> None:
        conn = self._conns.pop(role, None)
        if conn is not None:
            conn.close()

    async def _run(self, pool: ThreadPoolExecutor, role: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` on that thread's connection (made there the first time)."""
        def run() -> T:
            conn = self._conns.get(role)
            if conn is None:
                conn = self._conns[role] = connect(self.path, mapped=role == "read")
            return fn(conn)

        return await asyncio.get_running_loop().run_in_executor(pool, run)
