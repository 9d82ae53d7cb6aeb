from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store.db import create_engine, ensure_schema
from bot.store.repositories import SqlStore


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    """A migrated database of each kind (`db_url`: SQLite, and PostgreSQL where it runs)."""
    engine = create_engine(db_url)
    await ensure_schema(engine)
    yield engine
    await engine.dispose()


@pytest.fixture
async def store(engine: AsyncEngine) -> AsyncIterator[SqlStore]:
    """A store on that database, closed (its queued writes flushed) after the test."""
    store = SqlStore(engine)
    yield store
    await store.close()
