"""yokebot behind a real PgBouncer (issue 44): in transaction pooling, asks and `yokebot run` keep working (no
named prepared statement outlives a transaction; what needs a database session of its own goes on
YOKEBOT_DATABASE_DIRECT_URL); without that direct URL, `yokebot run` stops with one sentence and `doctor` says why;
session pooling works without one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import PgRoute, pgbouncer
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.pgbouncer import direct_of
from tests.helpers import free_port
from tests.test_cli import base_env, yokebot

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_route() -> PgRoute:
    return "transaction"


def pg_env(tmp_path: Path, fake: FakeOpenAI, url: str, direct: str | None) -> dict[str, str]:
    agent = tmp_path / "agents" / "ops"
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "AGENT.md").write_text("---\ntools:\n  current_time: {}\n---\nYou are ops.\n")
    env = base_env(tmp_path, fake) | {"YOKEBOT_DATABASE_URL": url}
    if direct is not None:
        env["YOKEBOT_DATABASE_DIRECT_URL"] = direct
    return env


def test_asks_through_a_transaction_pooler_answer_every_time(tmp_path: Path, fake_llm: FakeOpenAI,
                                                             pg_database: str):
    env = pg_env(tmp_path, fake_llm, pg_database, direct_of(pg_database))
    sessions = []
    for n in range(3):  # the first migrates; the second and third used to stop on a prepared statement
        fake_llm.reply(f"answer {n}")
        out = yokebot("ask", "--json", f"question {n}", env=env)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert data["answer"] == f"answer {n}"
        sessions.append(data["session_id"])
    fake_llm.reply("still here")
    out = yokebot("ask", "--json", "--session", sessions[0], "and now?", env=env)  # its history read back
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["answer"] == "still here"


def test_run_and_doctor_refuse_a_transaction_pooler_without_a_direct_url(tmp_path: Path, fake_llm: FakeOpenAI,
                                                                        pg_database: str):
    env = pg_env(tmp_path, fake_llm, pg_database, None) | {
        "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s" * 32, "YOKEBOT_HTTP_PORT": str(free_port()),
        "YOKEBOT_HTTP_HOST": "127.0.0.1"}
    out = yokebot("run", env=env)
    assert out.returncode != 0
    assert "transaction pooling" in out.stderr and "YOKEBOT_DATABASE_DIRECT_URL" in out.stderr
    assert "Traceback" not in out.stderr
    doctor = yokebot("doctor", env=env)
    assert doctor.returncode != 0
    assert "transaction pooling" in doctor.stdout and "Ready." not in doctor.stdout
    env["YOKEBOT_DATABASE_DIRECT_URL"] = direct_of(pg_database) or ""
    doctor = yokebot("doctor", env=env)
    assert "through a pooler in transaction pooling; locks, wake-ups and the writer on the direct URL" in doctor.stdout


def test_session_pooling_needs_no_direct_url(tmp_path: Path, fake_llm: FakeOpenAI, pg_database: str):
    url = pgbouncer("session").url(pg_database.rsplit("/", 1)[1])
    env = pg_env(tmp_path, fake_llm, url, None)
    for n in range(2):
        fake_llm.reply(f"answer {n}")
        out = yokebot("ask", f"question {n}", env=env)
        assert out.returncode == 0, out.stderr
        assert f"answer {n}" in out.stdout
    doctor = yokebot("doctor", env=env)
    assert "through a pooler in session pooling" in doctor.stdout
