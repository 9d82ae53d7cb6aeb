"""Exactly once across processes on PostgreSQL: one leader by advisory lock, fail-over when it dies,
and the UNIQUE(schedule, planned_at) row behind it. Also the store on both databases."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from bot.scheduling.leader import PostgresAdvisoryLock
from bot.scheduling.model import Schedule
from bot.scheduling.store import ScheduleStore
from bot.store.db import create_engine, ensure_schema, upgrade
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.pgbouncer import direct_of
from tests.helpers import write_agent
from tests.scheduling.conftest import answer_every_time

POLL = 0.3


@pytest.mark.postgres
async def test_the_advisory_lock_has_one_holder_and_frees_when_its_connection_closes(pg_database: str):
    first, second = PostgresAdvisoryLock(pg_database), PostgresAdvisoryLock(pg_database)
    try:
        assert await first.try_acquire()
        assert not await second.try_acquire()
        assert await first.try_acquire()  # re-entrant for its holder
        assert await first.still_held()
        await first.release()
        assert await second.try_acquire()
        assert await second.still_held()
    finally:
        await first.release()
        await second.release()


async def test_store_claims_each_planned_time_once_and_reads_utc_back(db_url: str):
    engine = create_engine(db_url)
    try:
        await ensure_schema(engine)
        store = ScheduleStore(engine)
        s = await store.add(Schedule(name="r", agent="a", source="runtime", prompt="p", every="1m"))
        planned = s.created_at + timedelta(minutes=1)
        first = await store.claim(s, planned, "scheduled", "one")
        assert first is not None
        assert await store.claim(s, planned, "scheduled", "two") is None
        assert not await store.record_missed(s, planned, "late", "two")
        await store.finish(first, "ok", session_id="abc", posted_ref="#c/1")
        (run,) = await store.history("r")
        assert (run.status, run.runner, run.posted_ref, run.planned_at) == ("ok", "one", "#c/1", planned)
        assert run.planned_at.utcoffset() == timedelta(0)
        assert await store.last_planned("r") == planned
        # the migration goes down and up again with the data model intact
        await upgrade(engine, "0001")
        await upgrade(engine)
    finally:
        await engine.dispose()


# --- two `yokebot run` processes ----------------------------------------------------------------------
class Proc:
    def __init__(self, name: str, env: dict[str, str], cwd: Path) -> None:
        self.log = cwd / f"{name}.log"
        self.handle = self.log.open("w")
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "bot", "run"],
            env={**os.environ, **env},
            cwd=cwd,
            stdout=self.handle,
            stderr=subprocess.STDOUT,
        )
        self.runner = f"{os.uname().nodename}:{self.popen.pid}"

    def output(self) -> str:
        return self.log.read_text()

    async def wait_for(self, needle: str, timeout: float = 20.0) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.output():
                return time.monotonic()
            if self.popen.poll() is not None:
                raise AssertionError(f"process exited early:\n{self.output()}")
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out waiting for {needle!r}:\n{self.output()}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self.handle.close()


async def _first_leader(procs: list[Proc], timeout: float = 25.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any("is the leader" in p.output() for p in procs):
            return time.monotonic()
        await asyncio.sleep(0.05)
    raise AssertionError("no process became the leader:\n" + "\n".join(p.output() for p in procs))


async def _runs(engine: Any) -> list[Any]:
    async with engine.connect() as conn:
        return list(
            (
                await conn.execute(
                    text("SELECT planned_at, status, kind, runner FROM schedule_runs ORDER BY planned_at")
                )
            ).all()
        )


async def _until(engine: Any, check: Any, timeout: float = 15.0) -> list[Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = await _runs(engine)
        if check(runs):
            return runs
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out; runs: {await _runs(engine)}")


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.parametrize("pg_route", ["direct", pytest.param("transaction", id="pgbouncer-transaction")])
async def test_two_processes_run_every_planned_time_once_and_fail_over(
    pg_database: str, fake_llm: FakeOpenAI, tmp_path: Path
):
    """Through PgBouncer in transaction pooling too: the leader's session lock is on the direct URL."""
    write_agent(
        tmp_path / "agents",
        "reporter",
        """
tools: [current_time]
schedules:
  - {name: tick, every: 1s, prompt: "Status?"}
""",
        body="You write status reports.",
    )
    answer_every_time(fake_llm, "all good")
    env = {
        "YOKEBOT_DATABASE_URL": pg_database,
        **({"YOKEBOT_DATABASE_DIRECT_URL": direct} if (direct := direct_of(pg_database)) else {}),
        "YOKEBOT_AGENTS_DIR": str(tmp_path / "agents"),
        "OPENAI_BASE_URL": fake_llm.base_url,
        "OPENAI_API_KEY": "sk-test-key-123",
        "YOKEBOT_MODEL": "m",
        "YOKEBOT_HTTP_PORT": "0",
        "YOKEBOT_SCHEDULE_POLL_SECONDS": str(POLL),
        "YOKEBOT_SCHEDULE_MISFIRE_GRACE_SECONDS": "30",
        "YOKEBOT_LOG_LEVEL": "INFO",
    }
    engine = create_engine(pg_database, pooled=True)
    await ensure_schema(engine, direct_url=direct_of(pg_database))  # as `yokebot db upgrade` would before starting several processes
    procs = [Proc("a", env, tmp_path), Proc("b", env, tmp_path)]
    try:
        leader_at = await _first_leader(procs)
        first = next(p for p in procs if "is the leader" in p.output())
        second = next(p for p in procs if p is not first)
        await second.wait_for("yokebot is running", timeout=max(5.0, 25 - (time.monotonic() - leader_at)))
        await _until(engine, lambda runs: sum(r.status == "ok" for r in runs) >= 3)
        assert "is the leader" not in second.output()  # it stood by while the first one led

        first.stop(signal.SIGKILL)
        killed = time.monotonic()
        took_over = await second.wait_for("is the leader", timeout=10)
        assert took_over - killed < POLL + 2.0

        await _until(
            engine, lambda runs: sum(r.runner == second.runner and r.status == "ok" for r in runs) >= 3
        )
        second.stop()
        runs = await _runs(engine)
    finally:
        for proc in procs:
            proc.stop(signal.SIGKILL)
        await engine.dispose()

    # every planned time on the one-second grid has exactly one row, run by one process or recorded as missed
    planned = [r.planned_at for r in runs]
    assert [(b - a).total_seconds() for a, b in itertools.pairwise(planned)] == [1.0] * (len(planned) - 1)
    assert {r.status for r in runs} <= {"ok", "missed", "abandoned", "failed"}
    by_first = [r.planned_at for r in runs if r.runner == first.runner]
    by_second = [r.planned_at for r in runs if r.runner == second.runner]
    assert by_first and by_second and max(by_first) < min(by_second)  # one leader at a time, then the other
    assert {r.runner for r in runs} == {first.runner, second.runner}
    # and the engine ran one turn per planned time at most: per_run sessions are keyed by planned time
    engine = create_engine(pg_database, pooled=True)
    try:
        async with engine.connect() as conn:
            per_session = (
                await conn.execute(
                    text(
                        "SELECT s.thread, count(t.id) AS n FROM sessions s "
                        "JOIN turns t ON t.session_id = s.id "
                        "WHERE t.trigger = 'schedule' GROUP BY s.thread"
                    )
                )
            ).all()
    finally:
        await engine.dispose()
    assert {row.n for row in per_session} == {1}
    claimed = sum(r.status in ("ok", "failed", "abandoned") for r in runs)
    assert sum(r.status == "ok" for r in runs) <= len(per_session) <= claimed
