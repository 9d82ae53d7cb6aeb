"""What every `yokebot` command shares: the consoles, settings from the environment, logging, and running a
coroutine so that a YokebotError becomes one red sentence. Its own module so that the command modules
(bot/cli.py, bot/commands/observe.py, bot/commands/schedule.py) import it and not each other."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import typer
from rich.console import Console

from bot.config import Settings
from bot.engine.errors import YokebotError

T = TypeVar("T")

out = Console()
err = Console(stderr=True)


def setup_logging(settings: Settings, quiet: bool = False) -> None:
    from bot.observability.logs import setup_logging as configure

    configure(settings, quiet=quiet)


def run_async(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine; a YokebotError becomes one red sentence and exit code 1, not a traceback."""
    try:
        return asyncio.run(factory())  # type: ignore[arg-type]
    except YokebotError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def settings_or_exit() -> Settings:
    try:
        return Settings()
    except Exception as exc:  # pydantic ValidationError: a bad value in the environment or .env
        err.print(f"[red]error:[/red] invalid settings: {exc}", highlight=False)
        raise typer.Exit(2) from None
