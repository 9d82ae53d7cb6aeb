"""Mistakes a new user makes get one sentence that names what to change, never a traceback."""

from __future__ import annotations

import re
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bot.config import async_database_url, unknown_variables
from tests.fakes.openai_server import FakeOpenAI
from tests.test_cli import base_env, ops_agent, yokebot


def one_sentence(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize(("pasted", "used"), [
    ("postgresql://u:p@db:5432/yokebot", "postgresql+asyncpg://u:p@db:5432/yokebot"),
    ("postgres://u@db/yokebot", "postgresql+asyncpg://u@db/yokebot"),
    ("postgresql+asyncpg://u@db/yokebot", "postgresql+asyncpg://u@db/yokebot"),
    ("sqlite:///./yokebot.db", "sqlite+aiosqlite:///./yokebot.db"),
    ("sqlite+aiosqlite:////data/y.db", "sqlite+aiosqlite:////data/y.db"),
])
def test_pasted_database_urls_get_the_async_driver(pasted: str, used: str):
    assert async_database_url(pasted) == used


def test_postgresql_url_as_people_paste_it_works(tmp_path: Path, pg_database: str):
    env = base_env(tmp_path, None)
    env["YOKEBOT_DATABASE_URL"] = pg_database.replace("postgresql+asyncpg://", "postgresql://")
    out = yokebot("db", "upgrade", env=env)
    assert out.returncode == 0, out.stderr
    out = yokebot("sessions", env=env)
    assert out.returncode == 0 and "No sessions match" in out.stdout, out.stderr


@pytest.mark.parametrize("url", ["not a url", "mysql://u@h/db", "postgresql+psycopg2://u@h/db"])
def test_a_bad_database_url_is_one_sentence(tmp_path: Path, url: str):
    env = base_env(tmp_path, None) | {"YOKEBOT_DATABASE_URL": url}
    out = yokebot("sessions", env=env)
    assert out.returncode == 2
    assert "YOKEBOT_DATABASE_URL" in one_sentence(out.stderr)


def test_unknown_migration_revision_is_one_sentence(tmp_path: Path):
    out = yokebot("db", "upgrade", "9999", env=base_env(tmp_path, None))
    assert out.returncode == 1
    line = one_sentence(out.stderr)
    assert "9999" in line and "yokebot db upgrade" in line


def test_unreachable_database_is_one_sentence(tmp_path: Path):
    env = base_env(tmp_path, None) | {"YOKEBOT_DATABASE_URL": "postgresql://nobody@127.0.0.1:9/nothing"}
    out = yokebot("db", "upgrade", env=env)
    assert out.returncode == 1
    assert "YOKEBOT_DATABASE_URL" in one_sentence(out.stderr)


def test_a_port_in_use_is_one_sentence(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_agent(tmp_path)
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = base_env(tmp_path, fake_llm) | {"YOKEBOT_HTTP_PORT": str(port), "YOKEBOT_LOG_LEVEL": "ERROR",
                                               "YOKEBOT_SCHEDULER_ENABLED": "false"}
        out = yokebot("run", env=env)
    assert out.returncode == 1
    line = one_sentence(out.stderr)
    assert f"port {port} is already in use" in line and "YOKEBOT_HTTP_PORT" in line


def test_an_unreachable_slack_api_is_one_sentence(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_agent(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = base_env(tmp_path, fake_llm) | {
        "YOKEBOT_HTTP_PORT": str(port), "YOKEBOT_LOG_LEVEL": "ERROR", "SLACK_BOT_TOKEN": "xoxb-test-000000",
        "SLACK_APP_TOKEN": "xapp-test-000000", "SLACK_API_URL": f"http://127.0.0.1:{closed}/api/"}
    out = yokebot("run", env=env)
    assert out.returncode == 1
    line = one_sentence(out.stderr)
    assert "Cannot reach the Slack API" in line and "SLACK_API_URL" in line
    assert "xoxb-test" not in out.stderr


def test_settings_errors_name_the_environment_variable(tmp_path: Path):
    out = yokebot("sessions", env=base_env(tmp_path, None) | {"YOKEBOT_HTTP_PORT": "eighty"})
    assert out.returncode == 2
    line = one_sentence(out.stderr)
    assert "YOKEBOT_HTTP_PORT" in line and "http_port" not in line.replace("YOKEBOT_HTTP_PORT", "")


def test_a_log_level_that_does_not_exist_is_an_error(tmp_path: Path):
    out = yokebot("sessions", env=base_env(tmp_path, None) | {"YOKEBOT_LOG_LEVEL": "LOUD"})
    assert out.returncode == 2
    assert "YOKEBOT_LOG_LEVEL" in one_sentence(out.stderr) and "WARNING" in out.stderr


def test_a_misspelt_variable_is_warned_about_with_a_suggestion(tmp_path: Path):
    out = yokebot("sessions", env=base_env(tmp_path, None) | {"YOKEBOT_DATABSE_URL": "sqlite:///x.db"})
    assert out.returncode == 0
    assert "YOKEBOT_DATABSE_URL is not a yokebot setting" in out.stderr
    assert "did you mean YOKEBOT_DATABASE_URL?" in out.stderr


def test_misspelt_variables_in_the_env_file_are_found_too(tmp_path: Path):
    (tmp_path / ".env").write_text("# comment\nexport YOKEBOT_HTTP_PROT=9000\nYOKEBOT_MODEL=llama3\n")
    warnings = unknown_variables({}, tmp_path / ".env")
    assert warnings == ["YOKEBOT_HTTP_PROT is not a yokebot setting and is ignored; did you mean YOKEBOT_HTTP_PORT?"]


def test_an_agents_folder_that_is_not_there_is_named_with_where_it_looked(tmp_path: Path):
    """YOKEBOT_AGENTS_DIR names a missing folder (unset, outside a checkout, the installed agents are used:
    tests/test_install.py)."""
    env = base_env(tmp_path, None)
    del env["YOKEBOT_DATABASE_URL"]
    for args in (("agents", "list"), ("agents", "show", "ops")):
        out = yokebot(*args, env=env, cwd=tmp_path)
        assert out.returncode == 1
        line = one_sentence(out.stderr)
        assert str(tmp_path / "agents") in line and "YOKEBOT_AGENTS_DIR" in line


def test_read_only_commands_do_not_create_a_database(tmp_path: Path):
    env = base_env(tmp_path, None)
    del env["YOKEBOT_AGENTS_DIR"], env["YOKEBOT_DATABASE_URL"]
    commands = (("sessions",), ("sessions", "--json"), ("usage",), ("trace", "abc"), ("agents", "list"),
                ("schedule", "list"))
    with ThreadPoolExecutor(3) as pool:  # independent processes, side by side
        for out in pool.map(lambda args: yokebot(*args, env=env, cwd=tmp_path), commands):
            assert "Traceback" not in out.stderr, out.stderr
    assert not (tmp_path / "yokebot.db").exists()
    assert list(tmp_path.glob("yokebot.db*")) == []
    out = yokebot("sessions", "--json", env=env, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "[]" and "no database at" in out.stderr


def test_ask_and_chat_without_their_agents_folder_fail_before_creating_a_database(tmp_path: Path,
                                                                                   fake_llm: FakeOpenAI):
    env = base_env(tmp_path, fake_llm)  # YOKEBOT_AGENTS_DIR: a folder that is not there
    del env["YOKEBOT_DATABASE_URL"]  # the default: ./yokebot.db
    for args, stdin in ((("ask", "hi"), None), (("chat",), "hi\n")):
        out = yokebot(*args, env=env, cwd=tmp_path, stdin=stdin)
        assert out.returncode == 1, out.stderr
        line = one_sentence(out.stderr)
        assert str(tmp_path / "agents") in line and "the agents installed with it: ops, logs, metrics" in line
    assert list(tmp_path.glob("yokebot.db*")) == []
    assert fake_llm.requests == []


def test_the_variables_ci_and_the_tests_set_are_not_warned_about():
    """.ci/run exports YOKEBOT_REQUIRE_* for the tests; were one unknown, every command the tests run would print a
    warning first, and `--json` output read from stderr would not parse."""
    root = Path(__file__).resolve().parents[1]
    exported = set(re.findall(r"\bexport (YOKEBOT_\w+)=", (root / ".ci" / "run").read_text()))
    read = {m for f in (root / "tests").rglob("*.py")
            for m in re.findall(r"os\.environ(?:\.get)?[\[(]\"(YOKEBOT_(?:REQUIRE|TEST|SQLITE_VEC)\w*)\"", f.read_text())}
    assert {"YOKEBOT_REQUIRE_SQLITE_VEC", "YOKEBOT_REQUIRE_PG"} <= exported | read
    assert unknown_variables(dict.fromkeys(exported | read, "1"), None) == []
