"""A PostgreSQL restart must not fail the next turn: pooled connections the server closed are replaced."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from bot.store.db import create_engine
from tests.conftest import _pg_admin

pytestmark = pytest.mark.postgres


async def test_connections_closed_by_the_server_are_replaced_at_checkout(pg_database: str):
    engine = create_engine(pg_database, pool_size=2)
    try:
        # fill the pool with two idle connections
        async with engine.connect() as a, engine.connect() as b:
            assert (await a.execute(text("SELECT 1"))).scalar() == 1
            assert (await b.execute(text("SELECT 1"))).scalar() == 1
        name = pg_database.rsplit("/", 1)[1]
        await _pg_admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")
        await asyncio.sleep(0.2)  # the server's goodbye reaches the idle sockets
        for _ in range(3):
            async with engine.connect() as conn:
                assert (await conn.execute(text("SELECT 2"))).scalar() == 2
    finally:
        await engine.dispose()
