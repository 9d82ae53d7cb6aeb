"""`yokebot db prune --older-than 30d` removes old sessions with all their audit rows, and nothing else."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text
from typer.testing import CliRunner

from bot.cli import app
from bot.store.db import create_engine
from tests.fakes.openai_server import FakeOpenAI
from tests.observability.seed import seed

TABLES = ("sessions", "turns", "messages", "llm_calls", "tool_invocations")


async def sql(url: str, statement: str, **params: Any) -> list[Any]:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            result = await conn.execute(text(statement), params)
            return list(result.all()) if result.returns_rows else []
    finally:
        await engine.dispose()


async def age(url: str, session_id: str, days: int) -> None:
    """Make a seeded session look `days` old, as if it had run then."""
    then = datetime.now(UTC) - timedelta(days=days)
    await sql(url, "UPDATE sessions SET updated_at = :t, created_at = :t WHERE id = :s", t=then, s=session_id)
    await sql(url, "UPDATE turns SET started_at = :t WHERE session_id = :s", t=then, s=session_id)
    old, new = then, datetime.now(UTC)
    await sql(url, "INSERT INTO schedule_runs (schedule, agent, planned_at, status) VALUES "
                   "('a/old', 'tester', :o, 'ok'), ('a/new', 'tester', :n, 'ok')", o=old, n=new)
    await sql(url, "INSERT INTO processed_events (platform, event_id, received_at) VALUES "
                   "('slack', 'Ev-old', :o), ('slack', 'Ev-new', :n)", o=old, n=new)
    inbox = ("INSERT INTO inbox (platform, event_key, channel, thread, text, trigger, reply, state, attempts, "
             "created_at, updated_at) VALUES ('slack', :k, 'C1', '', 'hi', 'mention', '{}', :st, 1, :t, :t)")
    await sql(url, inbox, k="C1:old-answered", st="answered", t=old)
    await sql(url, inbox, k="C1:old-but-open", st="claimed", t=old)  # still owed an answer: kept
    await sql(url, inbox, k="C1:new-answered", st="answered", t=new)
    await sql(url, "INSERT INTO memories (agent, channel, content, session_id, created_at) VALUES "
                   "('tester', NULL, 'the disk is /dev/sda', :s, :o)", s=session_id, o=old)


async def counts(url: str, session_id: str) -> dict[str, int]:
    out = {}
    for table in TABLES:
        column = "id" if table == "sessions" else "session_id"
        out[table] = (await sql(url, f"SELECT count(*) FROM {table} WHERE {column} = :s", s=session_id))[0][0]
    return out


def test_prune_removes_exactly_the_old_sessions(db_url: str, fake_llm: FakeOpenAI, agents_dir: Path):
    data = asyncio.run(seed(db_url, fake_llm, agents_dir))
    asyncio.run(age(db_url, data.ops, days=40))
    env = {"YOKEBOT_DATABASE_URL": db_url, "YOKEBOT_AGENTS_DIR": str(agents_dir)}
    before_old, before_new = asyncio.run(counts(db_url, data.ops)), asyncio.run(counts(db_url, data.chat))
    assert before_old == {"sessions": 1, "turns": 2, "messages": 7, "llm_calls": 5, "tool_invocations": 2}

    dry = CliRunner().invoke(app, ["db", "prune", "--older-than", "30d", "--dry-run"], env=env)
    assert dry.exit_code == 0, dry.output
    assert "would delete" in dry.stdout
    assert "5 llm_calls, 2 tool_invocations, 7 messages, 2 turns, 1 sessions" in dry.stdout
    assert "1 schedule_runs, 1 processed_events" in dry.stdout
    assert asyncio.run(counts(db_url, data.ops)) == before_old

    result = CliRunner().invoke(app, ["db", "prune", "--older-than", "30d"], env=env)
    assert result.exit_code == 0, result.output
    assert "deleted" in result.stdout and "1 sessions" in result.stdout
    assert asyncio.run(counts(db_url, data.ops)) == dict.fromkeys(TABLES, 0)
    assert asyncio.run(counts(db_url, data.chat)) == before_new  # recent session untouched
    runs = asyncio.run(sql(db_url, "SELECT schedule FROM schedule_runs"))
    events = asyncio.run(sql(db_url, "SELECT event_id FROM processed_events"))
    memories = asyncio.run(sql(db_url, "SELECT content FROM memories"))
    assert [r[0] for r in runs] == ["a/new"] and [e[0] for e in events] == ["Ev-new"]
    assert [m[0] for m in memories] == ["the disk is /dev/sda"]  # what the agent learned is kept
    inbox = asyncio.run(sql(db_url, "SELECT event_key FROM inbox ORDER BY event_key"))
    assert [r[0] for r in inbox] == ["C1:new-answered", "C1:old-but-open"]

    again = CliRunner().invoke(app, ["db", "prune", "--older-than", "30d"], env=env)
    assert "0 sessions" in again.stdout


def test_prune_rejects_a_bad_duration(sqlite_url: str, agents_dir: Path):
    env = {"YOKEBOT_DATABASE_URL": sqlite_url, "YOKEBOT_AGENTS_DIR": str(agents_dir), "COLUMNS": "200"}
    result = CliRunner().invoke(app, ["db", "prune", "--older-than", "a month"], env=env)
    assert result.exit_code == 1 and "like 30d, 12h, 2w or 90m" in result.output
