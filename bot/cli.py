"""The `yokebot` command line (also `python -m bot`).

One way to add commands: each command module (bot/commands/<group>.py, bot/mcp/cli.py) defines one
`typer.Typer`, and COMMANDS below lists it with the name it is called by; None: its commands are top-level
(`yokebot chat`, `yokebot run`). Each command imports what it needs when it runs: `yokebot --help` imports no
SQLAlchemy and no SDK."""

from __future__ import annotations

from typing import Annotated

import typer

from bot.commands.agents import agents_app
from bot.commands.alerts import alerts_app
from bot.commands.db import db_app
from bot.commands.demo import demo_app
from bot.commands.doctor import doctor_app
from bot.commands.eval import eval_app
from bot.commands.memory import memory_app
from bot.commands.observe import observe_app, sessions_app
from bot.commands.runbooks import runbooks_app
from bot.commands.schedule import schedule_app
from bot.commands.serve import serve_app
from bot.commands.support import run_async, settings_or_exit, setup_logging
from bot.commands.terminal import terminal_app
from bot.mcp.cli import mcp_app

__all__ = ["COMMANDS", "app", "main", "run_async", "settings_or_exit", "setup_logging"]

# (name, commands), in the order `yokebot --help` lists them
COMMANDS: tuple[tuple[str | None, typer.Typer], ...] = (
    (None, terminal_app),  # chat, ask: bot/commands/terminal.py
    (None, demo_app),  # demo: bot/commands/demo.py
    (None, serve_app),  # run: bot/commands/serve.py
    (None, doctor_app),  # doctor: bot/commands/doctor.py
    (None, observe_app),  # trace, usage: bot/commands/observe.py
    (None, eval_app),  # eval: bot/commands/eval.py
    ("agents", agents_app),  # bot/commands/agents.py
    ("db", db_app),  # bot/commands/db.py
    ("schedule", schedule_app),  # bot/commands/schedule.py
    ("mcp", mcp_app),  # bot/mcp/cli.py
    ("alerts", alerts_app),  # bot/commands/alerts.py
    ("runbooks", runbooks_app),  # bot/commands/runbooks.py
    ("memory", memory_app),  # bot/commands/memory.py
    ("sessions", sessions_app),  # bot/commands/observe.py
)

app = typer.Typer(help="yokebot: a self-hosted chat-ops agent for Slack and Discord.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
for _name, _commands in COMMANDS:
    app.add_typer(_commands, name=_name)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("yokebot")
        except PackageNotFoundError:
            number = "unknown (not installed)"
        print(f"yokebot {number}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool | None, typer.Option("--version", callback=_version, is_eager=True,
                                                 help="Print the version and exit.")] = None,
) -> None:
    """yokebot: a self-hosted chat-ops agent for Slack and Discord."""


def main() -> None:
    app()
