from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store.db import create_engine, ensure_schema
from bot.store.repositories import SqlStore
from tests.fakes.pgbouncer import direct_of


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    """A migrated database of each kind (`db_url`: SQLite, and PostgreSQL where it runs, through PgBouncer where
    a module sets `pg_route = via_pgbouncer`)."""
    direct = direct_of(db_url)
    engine = create_engine(db_url, pooled=direct is not None)
    await ensure_schema(engine, direct_url=direct)
    yield engine
    await engine.dispose()


@pytest.fixture
async def store(engine: AsyncEngine, db_url: str) -> AsyncIterator[SqlStore]:
    """A store on that database, closed (its queued writes flushed) after the test; through PgBouncer, its writer
    on the direct URL (as `yokebot run` puts it, bot/app.py)."""
    direct = direct_of(db_url)
    store = SqlStore(engine, direct=create_engine(direct) if direct is not None else None)
    yield store
    await store.close()
