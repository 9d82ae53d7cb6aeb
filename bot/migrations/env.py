"""Alembic environment. From code, a live connection arrives in `config.attributes["connection"]`;
from the `alembic` command line, the URL comes from YOKEBOT_DATABASE_URL (or alembic.ini)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

# imported for its effect: the alert tables join Base, so `alembic check` and autogenerate see them
import bot.alerts.tables  # noqa: F401  # pyright: ignore[reportUnusedImport]
from bot.store.models import Base

config = context.config
target_metadata = Base.metadata

# The memories' keyword index is made by SQL of its own (0016_memory_search), not declared in the models: SQLite's
# FTS5 table (and the shadow tables FTS5 keeps beside it), PostgreSQL's generated tsvector column and its index.
_KEYWORD_INDEX = {("table", "memories_fts"), ("column", "search"), ("index", "ix_memories_search")}
# pgvector's column, and its indexes, are made at start when the server has the extension (bot/store/vec_postgres.py)
_VECTOR_INDEX = {("column", "vec"), ("index", "ix_memories_vec_todo")}
# SQLite's: sqlite-vec's vec0 tables (and their shadow tables) and the queue that feeds them (bot/store/vec_sqlite.py)
_RUNTIME_TABLES = ("memories_fts", "memories_vec_")


def include_name(name: str | None, type_: str, parent_names: Mapping[Any, str | None]) -> bool:
    if type_ == "table":
        return not (name or "").startswith(_RUNTIME_TABLES)
    ours = (type_, name) in _KEYWORD_INDEX | _VECTOR_INDEX or (type_ == "index" and (name or "").startswith(
        "ix_memories_vec_"))
    return not (parent_names.get("table_name") == "memories" and ours)


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=include_name,
    )
    with context.begin_transaction():
        context.run_migrations()


def _url() -> str:
    return (
        os.environ.get("YOKEBOT_DATABASE_URL")
        or config.get_main_option("sqlalchemy.url")
        or "sqlite+aiosqlite:///./yokebot.db"
    )


async def _run_async() -> None:
    engine = create_async_engine(_url())
    async with engine.begin() as conn:
        await conn.run_sync(_run)
    await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
elif (conn := config.attributes.get("connection")) is not None:
    _run(conn)
else:
    asyncio.run(_run_async())
