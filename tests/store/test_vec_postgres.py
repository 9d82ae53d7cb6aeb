"""pgvector (bot/store/vec_postgres.py): with the server's `vector` extension, recall asks the database for the
facts nearest the question's vector among all of the agent's facts, so a fact no keyword finds and too old to be
among the newest is still recalled; scope, forget and a new model's vectors hold; a role that may not create the
extension leaves recall to the candidates' vectors, with one log line. The vectors come from the fake server's
`/v1/embeddings` through the real openai SDK; direct and through PgBouncer in transaction pooling.

Needs a PostgreSQL server with pgvector (0.5 or newer): skipped where it has none (`.ci/run` installs Debian's
`postgresql-NN-pgvector` where the apt sources offer it), unless YOKEBOT_REQUIRE_PGVECTOR=1."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.engine.model import Embeddings, OpenAIChatModel
from bot.store.db import create_engine, ensure_schema
from bot.store.repositories import SqlStore
from bot.store.vec_postgres import PgVectors
from tests.conftest import DIRECT_AND_TRANSACTION_POOLING, PG_ADMIN_URL, pg_available
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.pgbouncer import direct_of

pytestmark = pytest.mark.postgres

TARGET = "the postgresql primary runs on db2"  # "postgres" is not a word of it: only its trigrams are near
QUESTION = "is postgres healthy?"
NEWER = [f"deploy window {i} opens at {i % 24}h for the billing team" for i in range(40)]  # share no word with it


async def _offered() -> bool:
    conn = await asyncpg.connect(PG_ADMIN_URL.replace("postgresql+asyncpg", "postgresql"), timeout=5)
    try:
        return await conn.fetchval("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'") > 0
    finally:
        await conn.close()


@pytest.fixture
def pgvector() -> None:
    if pg_available() and asyncio.run(_offered()):
        return
    if os.environ.get("YOKEBOT_REQUIRE_PGVECTOR") == "1":
        pytest.fail("pgvector is required (YOKEBOT_REQUIRE_PGVECTOR=1) but the server has no `vector` extension")
    pytest.skip("the PostgreSQL server has no pgvector")


@pytest.fixture
async def store(pgvector: None, pg_database: str, fake_llm: FakeOpenAI) -> AsyncIterator[SqlStore]:
    direct = direct_of(pg_database)
    engine = create_engine(pg_database, pooled=direct is not None)
    await ensure_schema(engine, direct_url=direct)
    model = OpenAIChatModel(api_key="test", base_url=fake_llm.base_url)
    store = SqlStore(engine, direct=create_engine(direct) if direct else None,
                     embedder=Embeddings(model, "fake-embed"))
    try:
        yield store
    finally:
        await store.close()
        await model.close()
        await engine.dispose()


async def remember(store: SqlStore, facts: list[str], channel: str | None = None) -> list[int]:
    return [(await store.memory.remember("ops", channel, f, None)).id for f in facts]


async def scalar(engine: AsyncEngine, sql: str) -> object:
    async with engine.connect() as conn:
        return (await conn.execute(text(sql))).scalar()


@DIRECT_AND_TRANSACTION_POOLING
async def test_a_fact_no_keyword_finds_and_older_than_the_newest_is_recalled_by_pgvector(store: SqlStore):
    memory = store.memory
    await remember(store, [TARGET, *NEWER])
    index = await memory.open_index()
    assert isinstance(index, PgVectors) and index.name.startswith("pgvector ")
    await memory.recall("ops", "C1", QUESTION, 3)  # the first search of this dimension asks for its index
    await memory.settled()
    assert await scalar(store.engine, "SELECT count(*) FROM memories WHERE vec IS NULL") == 0
    assert await scalar(store.engine, "SELECT i.indisvalid FROM pg_index i "
                                      "WHERE i.indexrelid = 'ix_memories_vec_h256'::regclass") is True

    found = await memory.recall("ops", "C1", QUESTION, 3)
    assert TARGET in [f.content for f in found]
    memory.index = None  # the same recall over the keyword candidates' vectors only: out of reach
    assert TARGET not in [f.content for f in await memory.recall("ops", "C2", QUESTION, 3)]


@DIRECT_AND_TRANSACTION_POOLING
async def test_the_index_keeps_to_the_channel_and_forgets(store: SqlStore):
    memory = store.memory
    await memory.open_index()
    elsewhere, = await remember(store, [TARGET], channel="C2")
    await remember(store, NEWER, channel="C1")
    await memory.settled()
    assert TARGET not in [f.content for f in await memory.recall("ops", "C1", QUESTION, 3)]
    assert TARGET in [f.content for f in await memory.recall("ops", "C2", QUESTION, 3)]

    assert await memory.forget("ops", elsewhere) is not None
    await memory.settled()
    assert TARGET not in [f.content for f in await memory.recall("ops", "C2", QUESTION, 3)]


@DIRECT_AND_TRANSACTION_POOLING
async def test_a_vector_stored_again_is_indexed_again(store: SqlStore):
    """Another model's vector (or the backfill's) replaces `embedding`: the trigger empties `vec`, the index
    fills it again from the new one."""
    memory = store.memory
    await memory.open_index()
    first, = await remember(store, [TARGET])
    await memory.settled()
    async with store.engine.begin() as conn:
        before = (await conn.execute(text(f"SELECT vec::text FROM memories WHERE id = {first}"))).scalar()
        await conn.execute(text(f"UPDATE memories SET embedding = (SELECT embedding FROM memories m2 "
                                f"WHERE m2.id = {first}) || ''::bytea, embedding_model = 'other' WHERE id = {first}"))
        await conn.execute(text(f"UPDATE memories SET embedding = NULL WHERE id = {first}"))
    assert before is not None
    assert await scalar(store.engine, f"SELECT vec IS NULL FROM memories WHERE id = {first}") is True
    await memory.recall("ops", None, QUESTION, 3)  # the fact lacks a vector: made again in the background
    await memory.settled()
    await store.flush()
    memory.index.changed()  # type: ignore[union-attr]
    await memory.settled()
    assert await scalar(store.engine, f"SELECT vec::text FROM memories WHERE id = {first}") == before


async def test_a_role_that_may_not_create_the_extension_recalls_by_the_candidates_vectors(
        pgvector: None, fake_llm: FakeOpenAI, caplog: pytest.LogCaptureFixture):
    name = f"yokebot_noext_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(PG_ADMIN_URL.replace("postgresql+asyncpg", "postgresql"), timeout=5)
    await admin.execute(f'CREATE ROLE "{name}" LOGIN')
    await admin.execute(f'CREATE DATABASE "{name}" OWNER "{name}"')
    url = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgres@", f"{name}@") + f"/{name}"
    engine = create_engine(url)
    model = OpenAIChatModel(api_key="test", base_url=fake_llm.base_url)
    try:
        await ensure_schema(engine)
        store = SqlStore(engine, embedder=Embeddings(model, "fake-embed"))
        with caplog.at_level(logging.WARNING, logger="bot.store.vec_postgres"):
            assert await store.memory.open_index() is None
        said = [r.getMessage() for r in caplog.records if r.name == "bot.store.vec_postgres"]
        assert len(said) == 1 and "could not create the extension `vector`" in said[0], said
        await store.memory.remember("ops", None, TARGET, None)
        assert [f.content for f in await store.memory.recall("ops", None, QUESTION, 3)] == [TARGET]
        await store.close()
    finally:
        await model.close()
        await engine.dispose()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.execute(f'DROP ROLE IF EXISTS "{name}"')
        await admin.close()


async def test_an_index_that_fails_leaves_the_recall_to_the_candidates_with_a_log_line(
        store: SqlStore, caplog: pytest.LogCaptureFixture):
    memory = store.memory
    await memory.open_index()
    await remember(store, [TARGET])
    await memory.settled()
    async with store.engine.begin() as conn:  # an operator drops the column under a running bot
        await conn.execute(text("ALTER TABLE memories DROP COLUMN vec CASCADE"))
    with caplog.at_level(logging.WARNING, logger="bot.store.memory"):
        found = await memory.recall("ops", None, QUESTION, 3)
    assert [f.content for f in found] == [TARGET]
    said = [r.getMessage() for r in caplog.records if r.name == "bot.store.memory"]
    assert len(said) == 1 and "the index failed" in said[0], said
