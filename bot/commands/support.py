"""What every `yokebot` command shares: the consoles (`Terminal`s: the terminal's one gate, which shows no
control, bidi or zero-width character raw), settings from the environment, logging, and running a
coroutine so that a YokebotError becomes one red sentence. Its own module so that the command modules
(bot/cli.py, bot/commands/observe.py, bot/commands/schedule.py) import it and not each other."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.markup import escape

from bot.chat.console.view import Terminal
from bot.engine.errors import YokebotError

if TYPE_CHECKING:  # pydantic-settings and SQLAlchemy load when a command reads its settings, not for --help
    from sqlalchemy.ext.asyncio import AsyncEngine

    from bot.config import Settings

T = TypeVar("T")

out = Terminal()
err = Terminal(stderr=True, soft_wrap=True)


def terminal() -> Terminal:
    """A console of stdout for one command's tables: built when the command runs, it reads the terminal width
    (COLUMNS) then."""
    return Terminal()


def setup_logging(settings: Settings, quiet: bool = False) -> None:
    from bot.observability.logs import setup_logging as configure

    configure(settings, quiet=quiet)


def run_async(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine; a YokebotError becomes one red sentence and exit code 1, not a traceback."""
    try:
        return asyncio.run(factory())  # type: ignore[arg-type]
    except YokebotError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def where_from(settings: Settings, agent: str) -> tuple[str, ...]:
    """What a terminal command says at start so that it finds itself: where the agent's profile was read from,
    and, when the SQLite file does not exist yet, that a new database is being started there (a relative
    default such as ./yokebot.db, in another folder, would otherwise begin an empty history without a word)."""
    from sqlalchemy.engine import make_url

    from bot.shipped import shipped_agents

    base = settings.agents_dir.expanduser()
    shipped = shipped_agents()
    came = (" (the agents installed with yokebot: no ./agents here and YOKEBOT_AGENTS_DIR unset)"
            if shipped is not None and base.resolve() == shipped.resolve() and not Path("agents").is_dir() else "")
    notes = [f"agent {agent} from {(base / agent / 'AGENT.md').resolve()}{came}"]
    url = make_url(settings.database_url)
    database = url.database or ""
    if url.get_backend_name() == "sqlite" and database not in ("", ":memory:"):
        path = Path(database).expanduser().resolve()
        if not path.exists():
            notes.append(f"no database at {path} yet: a new one starts there (a conversation kept elsewhere "
                         "is not continued; run from its folder or set YOKEBOT_DATABASE_URL)")
    return tuple(notes)


def settings_or_exit() -> Settings:
    from bot.config import load_settings, unknown_variables

    for warning in unknown_variables():  # a misspelt YOKEBOT_* variable would otherwise be silently ignored
        err.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)
    try:
        return load_settings()
    except YokebotError as exc:  # a bad value in the environment or .env: the sentence names the variable
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from None


def chat_log(settings: Settings) -> Any:
    """Log lines of `chat` (retries, warnings) go to a file, not between the answers: YOKEBOT_CHAT_LOG_FILE."""
    path = settings.chat_log_file.expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        stream = path.open("a", encoding="utf-8")
    except OSError:
        import io

        stream = io.StringIO()  # nowhere to write: drop them rather than interleave them with the chat
    setup_logging_to(settings, stream)
    return stream


def setup_logging_to(settings: Settings, stream: Any) -> None:
    from bot.observability.logs import setup_logging as configure

    configure(settings, quiet=True, stream=stream)


def with_engine(fn: Callable[[AsyncEngine, Settings], Awaitable[T]]) -> T:
    """Run `fn` on the settings' database, brought up to the current schema first (a fresh install then
    answers "no sessions" rather than "no such table"); a database that cannot be used is one sentence."""
    from sqlalchemy.exc import DBAPIError

    from bot.store.db import create_engine, ensure_schema

    settings = settings_or_exit()
    setup_logging(settings, quiet=True)
    url = readable_url(settings)

    async def main() -> T:
        engine = create_engine(url, pooled=True)  # PostgreSQL: no statement named, for a pooler's sake (a few)
        try:
            await ensure_schema(engine, direct_url=settings.database_direct_url)
            return await fn(engine, settings)
        except (DBAPIError, OSError) as exc:
            where = engine.url.render_as_string(hide_password=True)
            raise YokebotError(f"cannot use the database at {where}: {_first_line(exc)}") from exc
        finally:
            await engine.dispose()

    return run_async(main)


def readable_url(settings: Settings) -> str:
    """The database to read from. A read-only command does not create a SQLite file where it runs: when the
    file is missing, it reads an empty in-memory database (and says so on stderr) instead."""
    from sqlalchemy.engine import make_url

    url = make_url(settings.database_url)
    database = url.database or ""
    if url.get_backend_name() != "sqlite" or database in ("", ":memory:") or Path(database).expanduser().exists():
        return settings.database_url
    err.print(f"[dim]no database at {database} yet (YOKEBOT_DATABASE_URL): nothing has been recorded[/dim]",
              highlight=False)
    return "sqlite+aiosqlite:///:memory:"


def driver_error(exc: BaseException) -> BaseException:
    """The database driver's own error inside SQLAlchemy's wrapper (its text names the cause), else `exc`."""
    from sqlalchemy.exc import DBAPIError

    return (exc.orig if isinstance(exc, DBAPIError) else None) or exc


def _first_line(exc: BaseException) -> str:
    text = str(driver_error(exc)).strip()
    return text.splitlines()[0] if text else type(exc).__name__
