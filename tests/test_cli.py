"""The CLI as a user runs it: real subprocesses, real SDK, the fake model server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, call

ROOT = Path(__file__).resolve().parents[1]


def yokebot(*args: str, env: dict[str, str], stdin: str | None = None, cwd: Path = ROOT):
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=cwd, env=env, input=stdin,
                          capture_output=True, text=True, timeout=60)


def base_env(tmp_path: Path, fake: FakeOpenAI | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "YOKEBOT_", "SLACK_", "DISCORD_"))}
    env.update(YOKEBOT_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}", YOKEBOT_AGENTS_DIR=str(tmp_path / "agents"),
               YOKEBOT_MODEL="cli-model", COLUMNS="200", PYTHONPATH=str(ROOT),
               YOKEBOT_CHAT_LOG_FILE=str(tmp_path / "chat.log"))
    if fake is not None:
        env.update(OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY="sk-cli-test-0000")
    return env


def ops_agent(tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "error.log").write_text("2026/11/30 08:00:01 [error] upstream timed out (110) 502\n")
    agent = tmp_path / "agents" / "ops"
    agent.mkdir(parents=True)
    (agent / "AGENT.md").write_text(
        f"---\ntools:\n  current_time: {{}}\n  read_file: {{roots: ['{logs}']}}\n---\nYou are ops.\n")
    return logs


def test_ask_json_runs_a_multi_step_turn(tmp_path: Path, fake_llm: FakeOpenAI):
    logs = ops_agent(tmp_path)
    fake_llm.calls(call("read_file", {"path": str(logs / "error.log")}))
    fake_llm.calls(call("read_file", {"path": "/etc/passwd"}))
    fake_llm.reply("One 502 at 08:00.")
    out = yokebot("ask", "--json", "check the error log", env=base_env(tmp_path, fake_llm))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["answer"] == "One 502 at 08:00."
    assert data["iterations"] == 3 and data["hit_iteration_limit"] is False and data["stopped_by"] == "answer"
    assert [(c["tool"], c["status"]) for c in data["tool_calls"]] == [("read_file", "ok"), ("read_file", "denied")]
    assert "upstream timed out" in data["tool_calls"][0]["result"]
    assert data["tool_calls"][1]["arguments"] == {"path": "/etc/passwd"}
    assert "outside the allowed paths" in data["tool_calls"][1]["result"]
    assert fake_llm.requests[0]["model"] == "cli-model"

    # --session continues that session: the model sees the earlier turn
    fake_llm.reply("Still one.")
    out = yokebot("ask", "--session", data["session_id"], "and now?", env=base_env(tmp_path, fake_llm))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Still one."
    assert [m["role"] for m in fake_llm.requests[-1]["messages"]][:2] == ["system", "user"]
    assert fake_llm.requests[-1]["messages"][1]["content"] == "check the error log"


def test_chat_survives_a_restart(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_agent(tmp_path)
    fake_llm.reply("Nice to meet you, Grace.")
    out = yokebot("chat", env=base_env(tmp_path, fake_llm), stdin="my name is Grace\n")
    assert out.returncode == 0, out.stderr
    assert "Nice to meet you, Grace." in out.stdout
    fake_llm.reply("You are Grace.")
    out = yokebot("chat", env=base_env(tmp_path, fake_llm), stdin="who am I?\n/quit\n")
    assert out.returncode == 0, out.stderr
    assert "You are Grace." in out.stdout
    contents = [m["content"] for m in fake_llm.requests[-1]["messages"][1:]]
    assert contents == ["my name is Grace", "Nice to meet you, Grace.", "who am I?"]


def test_missing_model_endpoint_is_one_clear_sentence(tmp_path: Path):
    ops_agent(tmp_path)
    out = yokebot("ask", "hello", env=base_env(tmp_path, None))
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert "set OPENAI_API_KEY" in " ".join(out.stderr.split()) and "OPENAI_BASE_URL" in out.stderr


def test_unknown_agent_and_unknown_session(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_agent(tmp_path)
    out = yokebot("ask", "--agent", "nobody", "hi", env=base_env(tmp_path, fake_llm))
    assert out.returncode == 1 and "No agent named 'nobody'" in out.stderr and "ops" in out.stderr
    out = yokebot("ask", "--session", "deadbeef", "hi", env=base_env(tmp_path, fake_llm))
    assert out.returncode == 1 and "no session 'deadbeef'" in out.stderr
    assert fake_llm.requests == []


def test_agents_list_show_and_db_upgrade(tmp_path: Path):
    ops_agent(tmp_path)
    env = base_env(tmp_path, None)
    out = yokebot("agents", "list", env=env)
    assert out.returncode == 0 and "ops" in out.stdout and "read_file" in out.stdout
    out = yokebot("agents", "show", "ops", env=env)
    assert out.returncode == 0 and "You are ops." in out.stdout and "Current date and time" in out.stdout
    assert "context window: 8,192 tokens (a guess for a model of unknown window; set context_window: in AGENT.md)" in out.stdout  # YOKEBOT_MODEL unknown: 8k
    assert "budgets per turn: none" in out.stdout
    out = yokebot("db", "upgrade", env=env)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "cli.db").exists()


def test_bad_profile_is_reported_with_file_and_line(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_agent(tmp_path)
    bad = tmp_path / "agents" / "broken"
    bad.mkdir()
    (bad / "AGENT.md").write_text("---\ntools: [sudo]\n---\nx\n")
    out = yokebot("ask", "hi", env=base_env(tmp_path, fake_llm))
    assert out.returncode == 1
    assert f"{bad / 'AGENT.md'}:2: unknown tool 'sudo'" in " ".join(out.stderr.split()).replace("AGENT.md: 2", "AGENT.md:2")


def test_help_version_and_a_readable_policy(tmp_path: Path):
    ops_agent(tmp_path)
    env = base_env(tmp_path, None)
    for args in (("--help",), ("ask", "--help"), ("db", "prune", "--help"), ("schedule", "add", "--help")):
        out = yokebot(*args, env=env)
        assert out.returncode == 0, out.stderr
        assert "<bool>" not in out.stdout and "<str>" not in out.stdout and "{text}" not in out.stdout
    assert "TEXT" in yokebot("ask", "--help", env=env).stdout
    out = yokebot("--version", env=env)
    assert out.returncode == 0 and out.stdout.startswith("yokebot ") and out.stdout.split()[1][0].isdigit()
    out = yokebot("agents", "show", "ops", env=env)
    assert out.returncode == 0
    assert "tool read_file:\n  roots: [" in out.stdout and "('" not in out.stdout and "{'" not in out.stdout


def test_a_relative_root_is_refused_with_the_line(tmp_path: Path):
    agent = tmp_path / "agents" / "ops"
    agent.mkdir(parents=True)
    (agent / "AGENT.md").write_text("---\ntools:\n  read_file:\n    roots: [logs]\n---\nYou are ops.\n")
    out = yokebot("agents", "show", "ops", env=base_env(tmp_path, None))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    text = " ".join(out.stderr.split())
    assert "AGENT.md:4" in text.replace("AGENT.md: 4", "AGENT.md:4") and "'logs' is a relative path" in text


def test_an_unknown_model_is_a_configuration_error_not_try_again_later(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_agent(tmp_path)
    fake_llm.fail(404, code="model_not_found", message="model 'cli-model' not found")
    out = yokebot("ask", "hello", env=base_env(tmp_path, fake_llm))
    assert out.returncode == 3
    answer = " ".join(out.stdout.split())
    assert f"the model 'cli-model' is not known at {fake_llm.base_url} (HTTP 404)" in answer
    assert "set YOKEBOT_MODEL" in answer and "try again later" not in answer
    assert len(fake_llm.requests) == 1  # not retried either


def test_ask_dash_reads_the_question_from_standard_input(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_agent(tmp_path)
    fake_llm.reply("Read it.")
    out = yokebot("ask", "-", env=base_env(tmp_path, fake_llm), stdin="what do these lines say?\nline two\n")
    assert out.returncode == 0, out.stderr
    assert fake_llm.requests[0]["messages"][-1]["content"] == "what do these lines say?\nline two\n"
    out = yokebot("ask", "-", env=base_env(tmp_path, fake_llm), stdin="")
    assert out.returncode == 2 and "standard input was empty" in out.stderr


def test_start_up_logs_leave_out_alembic_info_and_the_voice_and_token_warnings():
    import io
    import logging

    from bot.observability.logs import configure

    stream = io.StringIO()
    root = logging.getLogger()
    handler = configure(logging.INFO, stream=stream)
    try:
        logging.getLogger("alembic.runtime.migration").info("Context impl SQLiteImpl.")
        logging.getLogger("discord.client").warning("PyNaCl is not installed, voice will NOT be supported")
        logging.getLogger("slack_bolt.yokebot").warning("As you gave `client` as well, `token` will be unused.")
        logging.getLogger("bot.store.db").info("migrating database from empty to 0009")
        logging.getLogger("discord.client").warning("logging in using static token")
    finally:
        root.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert "migrating database" in lines[0] and "static token" in lines[1]
