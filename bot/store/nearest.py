"""A vector index over the memories' embeddings (docs/knowledge.md): the facts nearest a query's vector, found by
the database among all of an agent's facts, not only among the keyword candidates: pgvector's HNSW on PostgreSQL
(vec_postgres.py), sqlite-vec's vec0 on SQLite (vec_sqlite.py). Without one (the extension is not there), the
memory compares the query's vector with its keyword candidates' (vectors.py), the fallback the issue names.

An index follows the memories' stored vectors (`memories.embedding`, written by `remember` and the backfill):
told that they changed, it brings itself up to date in the background, so a fact is in it a moment after it is
stored; until then keywords and recency find it."""

from __future__ import annotations

from typing import Literal, Protocol

from bot.engine.ports import MemoryItem

Where = Literal["channel", "shared", "any"]  # the channel's facts and the shared ones; the shared ones; all
# each as SQL over `memories m` (`:channel`)
SCOPE: dict[Where, str] = {"channel": " AND (m.channel IS NULL OR m.channel = :channel)",
                           "shared": " AND m.channel IS NULL", "any": ""}


class Nearest(Protocol):
    @property
    def name(self) -> str:
        """What it is, for `doctor` and the logs ("pgvector 0.8.1 (hnsw)")."""
        ...

    async def nearest(self, agent: str, where: Where, channel: str | None, model: str, query: bytes, k: int
                      ) -> list[tuple[MemoryItem, float]] | None:
        """The `k` facts whose vectors (made by `model`) are nearest the packed, normalised `query`, nearest
        first, each with its cosine similarity; None when the index cannot answer yet (being built, another
        dimension): the memory falls back to the candidates' vectors."""
        ...

    def changed(self) -> None:
        """Vectors were stored or facts deleted: bring the index up to date, in the background."""
        ...

    async def settled(self) -> None:
        """Return once what was stored so far is in the index (tests, the CLI before it exits)."""
        ...

    async def close(self) -> None: ...
