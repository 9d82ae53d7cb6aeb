"""`yokebot trace` shows compaction (the summary call and what it folded) and the last call without
tools; `yokebot sessions reset ID` makes the session's next turn start afresh."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from bot.cli import app
from tests.engine.test_context import make_app, req, thread_model
from tests.fakes.openai_server import FakeOpenAI


async def _long_thread(sqlite_url: str, llm: FakeOpenAI, tmp_path: Path) -> str:
    bot = await make_app(sqlite_url, llm, tmp_path, "tools: [dump]\nmax_iterations: 4\ncontext_window: 6000")
    try:
        llm.handler = thread_model
        llm.enforce_window(6000)
        for n in range(1, 7):
            result = await bot.service.handle(req(f"question {n}"))
        return result.session_id
    finally:
        await bot.close()


def test_trace_shows_compaction_and_sessions_reset_forgets(sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path):
    session = asyncio.run(_long_thread(sqlite_url, fake_llm, tmp_path))
    env = {"YOKEBOT_DATABASE_URL": sqlite_url, "YOKEBOT_AGENTS_DIR": str(tmp_path / "agents-ctx"),
           "COLUMNS": "220", "NO_COLOR": "1"}
    runner = CliRunner()
    shown = runner.invoke(app, ["trace", session], env=env)
    assert shown.exit_code == 0, shown.output
    assert "summary call" in shown.stdout and "older turn(s) folded into the summary: Summary: the user" in shown.stdout

    reset = runner.invoke(app, ["sessions", "reset", session[:8]], env=env)
    assert reset.exit_code == 0, reset.output
    assert f"Session {session}" in reset.stdout and "memory reset" in reset.stdout
    assert runner.invoke(app, ["sessions", "reset", "nope"], env=env).exit_code == 1

    async def next_turn() -> list[str]:
        bot = await make_app(sqlite_url, fake_llm, tmp_path, "tools: [dump]\nmax_iterations: 4\ncontext_window: 6000")
        try:
            before = len(fake_llm.requests)
            await bot.service.handle(req("question 7"))
            return [m["role"] for m in fake_llm.requests[before]["messages"]]
        finally:
            await bot.close()

    assert asyncio.run(next_turn()) == ["system", "user"]
    listed = runner.invoke(app, ["sessions"], env=env)
    assert listed.exit_code == 0 and session in listed.stdout
