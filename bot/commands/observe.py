"""`yokebot sessions`, `yokebot trace`, `yokebot usage` and `yokebot db prune`, registered on the main app
by `register(app, db_app)` (bot/cli.py). Like `chat` and `ask`, they bring a database that is behind up to
the current schema first, so a fresh install answers "no sessions" rather than "no such table"."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from bot.commands.support import run_async, settings_or_exit, setup_logging
from bot.engine.errors import YokebotError
from bot.observability.timeparse import BadTime, parse_since, parse_span

if TYPE_CHECKING:  # imported when a command runs: `yokebot --help` loads neither SQLAlchemy nor the renderers
    from rich.console import Console
    from sqlalchemy.ext.asyncio import AsyncEngine

    from bot.config import Settings
    from bot.observability.prune import PruneResult

T = TypeVar("T")


def _out() -> Console:
    from rich.console import Console

    return Console()  # built per command: it reads the terminal width (COLUMNS) when it is made


def _render() -> ModuleType:
    from bot.observability import render

    return render

SinceOpt = Annotated[str | None, typer.Option("--since", metavar="WHEN",
                                              help="Since: 7d, 12h, 1h30m (m is minutes) or 2025-01-31 (UTC).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table (for scripts).")]


def _with_engine(fn: Callable[[AsyncEngine, Settings], Awaitable[T]]) -> T:
    from sqlalchemy.exc import DBAPIError

    from bot.store.db import create_engine, ensure_schema

    settings = settings_or_exit()
    setup_logging(settings, quiet=True)
    url = readable_url(settings)

    async def main() -> T:
        engine = create_engine(url)
        try:
            await ensure_schema(engine)
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
    from bot.commands.support import err

    err.print(f"[dim]no database at {database} yet (YOKEBOT_DATABASE_URL): nothing has been recorded[/dim]",
              highlight=False)
    return "sqlite+aiosqlite:///:memory:"


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _since(value: str | None) -> datetime | None:

    if value is None:
        return None

    async def parse() -> datetime:  # through run_async: a bad value becomes one red sentence
        return parse_since(value)

    return run_async(parse)


def sessions(
    ctx: typer.Context,
    platform: Annotated[str | None, typer.Option("--platform", help="slack, discord, console, cli.")] = None,
    channel: Annotated[str | None, typer.Option("--channel", help="Channel id or name as stored.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="Only this agent's sessions.")] = None,
    since: SinceOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many sessions to show.")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """List recent sessions: where they run, which agent, how many turns and tokens, last activity.

    `yokebot sessions reset ID` makes a session forget its conversation."""
    from bot.observability.queries import list_sessions

    if ctx.invoked_subcommand is not None:
        return
    cutoff = _since(since)
    items = _with_engine(lambda engine, _: list_sessions(
        engine, platform=platform, channel=channel, agent=agent, since=cutoff, limit=limit))
    if as_json:
        print(_render().sessions_json(items))
    elif not items:
        _out().print("No sessions match. Talk to an agent (`yokebot chat`, `yokebot ask`) and look again.")
    else:
        _out().print(_render().sessions_table(items))


def sessions_reset(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix), from `yokebot sessions`.")],
) -> None:
    """Forget a session's conversation: its next turn starts afresh, like `reset` typed in the chat.

    Long-term memories and the audit trail (`yokebot trace`) stay."""
    from bot.observability.queries import reset_session

    found = _with_engine(lambda engine, _: reset_session(engine, session))
    _out().print(f"Session {found.id} ({found.platform} {_render().where(found.channel, found.thread)}): "
                 "memory reset; its next turn starts afresh.", highlight=False, markup=False)


def trace(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix), from `yokebot sessions`.")],
    turn: Annotated[int | None, typer.Option("--turn", "-t", help="Only turn N (1 first, -1 last).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show what happened in a session: each turn as a tree of model calls and tool calls, then the answer."""
    from bot.observability.queries import trace as load_trace

    result = _with_engine(lambda engine, _: load_trace(engine, session, turn))
    if as_json:
        print(_render().trace_json(result))
        return
    out = _out()
    out.print(_render().trace_header(result))
    if not result.turns:
        out.print("This session has no turns yet.")
    for t in result.turns:
        out.print(_render().turn_tree(t))


def usage(
    since: SinceOpt = None,
    by: Annotated[str, typer.Option("--by", help="Group by agent, model, channel or day.")] = "agent",
    as_json: JsonOpt = False,
) -> None:
    """Model calls, tokens and estimated cost (YOKEBOT_MODEL_PRICES), and tool calls by status."""
    import json

    from bot.observability.usage import usage as load_usage

    cutoff = _since(since)
    report = _with_engine(lambda engine, settings: load_usage(engine, by=by, since=cutoff,
                                                               prices=settings.model_prices))
    if as_json:
        print(json.dumps(_render().usage_dict(report), indent=2))
        return
    out = _out()
    for table in _render().usage_tables(report):
        out.print(table)


MIN_PRUNE_AGE = timedelta(days=1)


def db_prune(
    older_than: Annotated[str, typer.Option(
        "--older-than", metavar="DURATION",
        help="Age of the last activity: 30d, 2w, 48h, 1h30m (m is minutes). Below 1d needs --force.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would go; delete nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking (for cron jobs).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Allow --older-than below one day.")] = False,
) -> None:
    """Delete sessions idle for longer than --older-than, with their turns, messages, model and tool calls.

    Asks before deleting (shows what would go) unless --yes; --dry-run only counts."""
    from bot.observability.prune import prune

    async def span() -> timedelta:
        age = parse_span(older_than)
        if age < MIN_PRUNE_AGE and not force:
            raise BadTime(f"--older-than {older_than} would delete the audit trail of the last {age}; "
                          "use 1d or more, or add --force if you mean it")
        return age

    cutoff = datetime.now(UTC) - run_async(span)
    planned = _with_engine(lambda engine, _: prune(engine, cutoff, dry_run=True))
    out = _out()
    if dry_run or planned.sessions + sum(planned.deleted.values()) == 0:
        out.print(_render().prune_summary(planned), highlight=False, soft_wrap=True)
        return
    if not yes:
        _confirm(out, planned)
    result = _with_engine(lambda engine, _: prune(engine, cutoff, dry_run=False))
    out.print(_render().prune_summary(result), highlight=False, soft_wrap=True)


def _confirm(out: Console, planned: PruneResult) -> None:
    out.print(_render().prune_summary(planned), highlight=False, soft_wrap=True)
    try:
        sure = typer.confirm("Delete these rows for good?", default=False)
    except typer.Abort:  # no answer (stdin closed, as in a cron job)
        sure = False
    if not sure:
        out.print("Nothing deleted (add --yes to delete without asking).")
        raise typer.Exit(1)


def register(app: typer.Typer, db_app: typer.Typer) -> None:
    sessions_app = typer.Typer(no_args_is_help=False)
    sessions_app.callback(invoke_without_command=True)(sessions)
    sessions_app.command("reset")(sessions_reset)
    app.add_typer(sessions_app, name="sessions")
    app.command("trace")(trace)
    app.command("usage")(usage)
    db_app.command("prune")(db_prune)
