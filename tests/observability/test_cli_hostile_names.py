"""What a model (or a model server, a platform) wrote reaches the terminal's tables as text: a tool name the model
made up (told so by a log line) or a run's error is Rich markup to a table cell, and `[/x]` made `yokebot usage` or
`schedule history` fail (a closing tag that matches nothing) for as long as the row was kept; `[link=…]` would
have drawn a hidden hyperlink."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from bot.app import build_app
from bot.cli import app as cli
from bot.engine.service import TurnRequest
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import registry
from tests.scheduling.test_cli import cli_env  # noqa: F401  # the fixture

NAMES = ("[/x]", "[link=https://evil.example]restart[/link]")


def test_usage_shows_a_made_up_tool_name_as_text(sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path):
    async def seed() -> None:
        bot = await build_app(make_settings(sqlite_url, fake_llm, agents_dir), registry=registry())
        try:
            fake_llm.calls(*(call(name, {}, f"c{i}") for i, name in enumerate(NAMES))).reply("done")
            await bot.service.handle(TurnRequest("slack", "C1", "t1", "go", "tester"))
        finally:
            await bot.close()

    asyncio.run(seed())
    done = CliRunner().invoke(cli, ["usage"], env={"YOKEBOT_DATABASE_URL": sqlite_url, "COLUMNS": "200",
                                                   "YOKEBOT_AGENTS_DIR": str(agents_dir)})
    assert done.exit_code == 0, done.output
    assert all(name in done.output for name in NAMES)


def test_schedule_history_shows_a_model_servers_error_as_text(cli_env: dict[str, str], fake_llm: FakeOpenAI):  # noqa: F811
    """A run's error quotes the model server's (or a platform's) message: `[/x]` in it made `schedule history`
    fail."""
    fake_llm.fail(400, message=f"bad request {NAMES[0]} {NAMES[1]}")
    assert CliRunner().invoke(cli, ["schedule", "run", "tick"], env=cli_env).exit_code == 1
    done = CliRunner().invoke(cli, ["schedule", "history", "tick"], env={**cli_env, "COLUMNS": "400"})
    assert done.exit_code == 0, done.output
    assert "[/x]" in done.output
