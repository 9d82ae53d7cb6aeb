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
    hook = ("INSERT INTO alert_notifications (source, body, state, attempts, received_at) "
            "VALUES ('alertmanager', :b, :st, 1, :t)")
    await sql(url, hook, b="old-done", st="done", t=old)
    await sql(url, hook, b="old-but-new", st="new", t=old)  # not processed yet: kept
    await sql(url, hook, b="new-done", st="done", t=new)
    group = ("INSERT INTO alert_groups (source, group_hash, group_key, agent, post_to, title, state, generation, "
             "alerts, investigation, cooldown_seconds, fired_at, updated_at) VALUES ('alertmanager', :h, :h, "
             "'ops', 'slack:#ops', '', :st, 1, '{}', 'none', 3600, :t, :t)").replace(":h, :h", ":h, :k")
    await sql(url, group, h="old-resolved", k="old-resolved", st="resolved", t=old)
    await sql(url, group, h="old-firing", k="old-firing", st="firing", t=old)  # still firing: its thread is kept
    await sql(url, group, h="new-resolved", k="new-resolved", st="resolved", t=new)
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
    assert "5 llm_calls, 2 tool_invocations, 7 messages, 0 summaries, 0 attachments, 0 turn_runbooks, 2 turns, 1 sessions" in dry.stdout
    assert "1 schedule_runs, 1 processed_events" in dry.stdout
    assert "1 alert_notifications, 1 alert_groups" in dry.stdout
    assert asyncio.run(counts(db_url, data.ops)) == before_old

    # without --yes it asks; no answer (stdin closed) deletes nothing
    refused = CliRunner().invoke(app, ["db", "prune", "--older-than", "30d"], env=env, input="")
    assert refused.exit_code == 1 and "Nothing deleted" in refused.stdout and "--yes" in refused.stdout
    assert asyncio.run(counts(db_url, data.ops)) == before_old
    declined = CliRunner().invoke(app, ["db", "prune", "--older-than", "30d"], env=env, input="n\n")
    assert declined.exit_code == 1 and asyncio.run(counts(db_url, data.ops)) == before_old

    result = CliRunner().invoke(app, ["db", "prune", "--older-than", "30d"], env=env, input="y\n")
    assert result.exit_code == 0, result.output
    assert "Delete these rows for good?" in result.stdout
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
    hooks = asyncio.run(sql(db_url, "SELECT body FROM alert_notifications ORDER BY body"))
    groups = asyncio.run(sql(db_url, "SELECT group_key FROM alert_groups ORDER BY group_key"))
    assert [r[0] for r in hooks] == ["new-done", "old-but-new"]
    assert [r[0] for r in groups] == ["new-resolved", "old-firing"]

    again = CliRunner().invoke(app, ["db", "prune", "--older-than", "30d"], env=env)  # nothing to ask about
    assert again.exit_code == 0 and "0 sessions" in again.stdout


def test_prune_rejects_a_bad_duration(sqlite_url: str, agents_dir: Path):
    env = {"YOKEBOT_DATABASE_URL": sqlite_url, "YOKEBOT_AGENTS_DIR": str(agents_dir), "COLUMNS": "200"}
    result = CliRunner().invoke(app, ["db", "prune", "--older-than", "a month"], env=env)
    assert result.exit_code == 1 and "like 30s, 15m, 1h30m, 7d or 2w" in " ".join(result.output.split())


def _env(url: str, agents: Path) -> dict[str, str]:
    return {"YOKEBOT_DATABASE_URL": url, "YOKEBOT_AGENTS_DIR": str(agents), "COLUMNS": "200"}


def test_prune_refuses_zero_and_ages_below_a_day_without_force(db_url: str, fake_llm: FakeOpenAI, agents_dir: Path):
    data = asyncio.run(seed(db_url, fake_llm, agents_dir))
    before = asyncio.run(counts(db_url, data.ops))
    env = _env(db_url, agents_dir)
    for typo in ("0d", "1m", "90m", "23h"):
        result = CliRunner().invoke(app, ["db", "prune", "--older-than", typo, "--yes"], env=env)
        assert result.exit_code == 1, (typo, result.output)
        assert "--force" in result.output or "empty" in result.output
    assert asyncio.run(counts(db_url, data.ops)) == before
    forced = CliRunner().invoke(app, ["db", "prune", "--older-than", "1m", "--force", "--dry-run"], env=env)
    assert forced.exit_code == 0 and "would delete" in forced.stdout
    assert "0d" not in forced.stdout and asyncio.run(counts(db_url, data.ops)) == before


def test_prune_yes_deletes_without_asking(sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path):
    data = asyncio.run(seed(sqlite_url, fake_llm, agents_dir))
    asyncio.run(age(sqlite_url, data.ops, days=20))
    result = CliRunner().invoke(app, ["db", "prune", "--older-than", "2w", "--yes"], env=_env(sqlite_url, agents_dir))
    assert result.exit_code == 0 and "deleted" in result.stdout and "?" not in result.stdout
    assert asyncio.run(counts(sqlite_url, data.ops)) == dict.fromkeys(TABLES, 0)


def test_one_duration_grammar_for_since_older_than_and_every():
    from datetime import timedelta as td

    from bot.engine.spec.cron import parse_every
    from bot.observability.timeparse import parse_since, parse_span

    assert parse_span("1h30m") == parse_span("90m") == td(minutes=90) == td(seconds=parse_every("1h30m"))
    assert parse_span("2w") == parse_span("14d") == td(seconds=parse_every("2w"))
    assert parse_span("1m") == td(minutes=1)  # m is minutes everywhere
    now = datetime(2026, 1, 31, tzinfo=UTC)
    assert parse_since("1h30m", now) == now - td(minutes=90)
