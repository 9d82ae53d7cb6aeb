"""Turns with no inbox row (`yokebot ask`, schedules) cut by a crash on PostgreSQL. Before, a killed
`yokebot ask` left its turn `running` in `turns` forever (`sessions` and `trace` showed it running). Now each
process keeps an `instances` row alive and names itself on its turns; a `yokebot run` ends the running turns
of a process that is gone as `interrupted`, and leaves a live process's running turn alone."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from bot.cli import app
from tests.fakes.openai_server import FakeOpenAI, Step
from tests.helpers import db_rows, write_agent
from tests.recovery.harness import Bot, free_port, wait_until

DIES, LIVES = "the question whose process is killed", "the question whose process lives on"
LIVE_ANSWER = threading.Event()  # the live process's answer waits for this: past the kill, a restart and a lease


def answer(body: dict[str, Any]) -> Step:
    question = str([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
    if DIES in question:
        return Step("reply", content="never seen", delay=60.0)
    return Step("reply", content="the slow answer", release=LIVE_ANSWER)


def turn(url: str, question: str) -> tuple[str, str | None, str] | None:
    try:
        rows = asyncio.run(db_rows(url, f"SELECT status, stopped_by, session_id FROM turns WHERE text = '{question}'"))
    except Exception:  # not migrated yet
        return None
    return tuple(rows[0]) if rows else None  # type: ignore[return-value]


def test_a_running_turn_of_a_killed_ask_ends_interrupted_and_a_live_ones_is_left_alone(
        tmp_path: Path, pg_database: str, fake_llm: FakeOpenAI):
    LIVE_ANSWER.clear()
    fake_llm.handler = answer
    agents = tmp_path / "agents"
    write_agent(agents, "ops", "description: ops\ntools: [current_time]")
    env = {**os.environ, "YOKEBOT_DATABASE_URL": pg_database, "YOKEBOT_AGENTS_DIR": str(agents),
           "YOKEBOT_DEFAULT_AGENT": "ops", "OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": "sk-test-123456",
           "YOKEBOT_MODEL": "test-model", "YOKEBOT_MODEL_MAX_ATTEMPTS": "1", "YOKEBOT_SCHEDULER_ENABLED": "false",
           "YOKEBOT_INBOX_LEASE_SECONDS": "1", "YOKEBOT_HTTP_PORT": str(free_port()),
           "YOKEBOT_HTTP_HOST": "127.0.0.1"}

    def ask(question: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "bot", "ask", question], env=env, cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    dies = ask(DIES)
    wait_until(lambda: turn(pg_database, DIES) is not None, 30, "the first turn's row")
    lives = ask(LIVES)
    try:
        wait_until(lambda: turn(pg_database, LIVES) is not None, 30, "the second turn's row")
        assert [turn(pg_database, q)[:2] for q in (DIES, LIVES)] == [("running", None)] * 2  # type: ignore[index]
        dies.kill()  # SIGKILL: no shutdown code runs
        dies.wait(timeout=10)

        run = Bot(env, tmp_path, "run")  # another instance, later: it sweeps at start and every third of a lease
        try:
            wait_until(lambda: turn(pg_database, DIES)[0] != "running", 20, "the dead turn to end", run)  # type: ignore[index]
            assert lives.poll() is None  # still working on its answer
            status, stopped_by, session = turn(pg_database, DIES)  # type: ignore[misc]
            assert (status, stopped_by) == ("error", "interrupted")
            assert turn(pg_database, LIVES)[:2] == ("running", None)  # type: ignore[index]
            time.sleep(1.5)  # a lease (1 s) past the sweep: the live turn is still left alone
            assert turn(pg_database, LIVES)[:2] == ("running", None)  # type: ignore[index]
            LIVE_ANSWER.set()
            out, _ = lives.communicate(timeout=30)
            assert lives.returncode == 0, out
            assert "the slow answer" in out
            assert turn(pg_database, LIVES)[:2] == ("ok", "answer")  # type: ignore[index]
        finally:
            assert run.stop() == 0, run.output()[-3000:]
        assert "turn(s) were left running by a yokebot process that is gone" in run.output()
    finally:
        if lives.poll() is None:
            lives.kill()
            lives.wait()
    trace = CliRunner().invoke(app, ["trace", session], env={**env, "COLUMNS": "220", "NO_COLOR": "1"})
    assert trace.exit_code == 0, trace.output
    assert "interrupted: the yokebot process running this turn stopped before it finished" in trace.stdout
    # a process that stopped cleanly leaves no row behind; the killed one's is gone after a while or stays
    # expired (it is no longer alive either way)
    alive = asyncio.run(db_rows(pg_database, "SELECT count(*) FROM instances WHERE alive_until >= now()"))
    assert alive == [(0,)]
