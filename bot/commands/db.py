"""`yokebot db`: every database command in one group, `upgrade` (apply the migrations) and `prune` (delete
old sessions with their audit rows)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from bot.commands.support import driver_error, out, run_async, settings_or_exit, terminal, with_engine
from bot.engine.errors import YokebotError
from bot.observability.timeparse import BadTime, parse_span

if TYPE_CHECKING:  # imported when a command runs: `yokebot --help` loads neither SQLAlchemy nor the renderers
    from rich.console import Console

    from bot.observability.prune import PruneResult

db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)


@db_app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument(help="Target revision.")] = "head") -> None:
    """Apply the database migrations (the embedded SQLite database is also migrated on first start)."""
    from alembic.util import CommandError
    from sqlalchemy.exc import SQLAlchemyError

    from bot.store.db import create_engine, upgrade

    settings = settings_or_exit()

    async def main() -> None:
        engine = create_engine(settings.database_direct_url or settings.database_url)  # under a session lock
        try:
            await upgrade(engine, revision)
        except CommandError as exc:  # an unknown revision: one sentence, not Alembic's traceback
            raise YokebotError(f"cannot upgrade to {revision!r} ({exc}); use `yokebot db upgrade` for the "
                               "newest schema") from None
        except (OSError, SQLAlchemyError) as exc:
            where = engine.url.render_as_string(hide_password=True)
            first = str(driver_error(exc)).strip().splitlines() or [type(exc).__name__]
            raise YokebotError(f"could not open the database at {where} ({first[0]}); check "
                               "YOKEBOT_DATABASE_URL") from None
        finally:
            await engine.dispose()

    run_async(main)
    out.print(f"database at {settings.database_url.split('@')[-1]} is at revision {revision}")


MIN_PRUNE_AGE = timedelta(days=1)


@db_app.command("prune")
def db_prune(
    older_than: Annotated[str, typer.Option(
        "--older-than", metavar="DURATION",
        help="Age of the last activity: 30d, 2w, 48h, 1h30m (m is minutes). Below 1d needs --force.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would go; delete nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking (for cron jobs).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Allow --older-than below one day.")] = False,
) -> None:
    """Delete sessions idle for longer than --older-than, with their turns, messages, model and tool calls
    (and schedule runs, seen events, settled inbox rows and alerts sent that are older).

    Asks before deleting (shows what would go) unless --yes; --dry-run only counts."""
    from bot.observability.prune import prune

    async def span() -> timedelta:
        age = parse_span(older_than)
        if age < MIN_PRUNE_AGE and not force:
            raise BadTime(f"--older-than {older_than} would delete the audit trail of the last {age}; "
                          "use 1d or more, or add --force if you mean it")
        return age

    cutoff = datetime.now(UTC) - run_async(span)
    planned = with_engine(lambda engine, _: prune(engine, cutoff, dry_run=True))
    out = terminal()
    if dry_run or planned.sessions + sum(planned.deleted.values()) == 0:
        out.print(_prune_summary(planned), highlight=False, soft_wrap=True)
        return
    if not yes:
        _confirm(out, planned)
    result = with_engine(lambda engine, _: prune(engine, cutoff, dry_run=False))
    out.print(_prune_summary(result), highlight=False, soft_wrap=True)


def _confirm(out: Console, planned: PruneResult) -> None:
    out.print(_prune_summary(planned), highlight=False, soft_wrap=True)
    try:
        sure = typer.confirm("Delete these rows for good?", default=False)
    except typer.Abort:  # no answer (stdin closed, as in a cron job)
        sure = False
    if not sure:
        out.print("Nothing deleted (add --yes to delete without asking).")
        raise typer.Exit(1)


def _prune_summary(result: PruneResult) -> str:
    from bot.observability.render import prune_summary

    return prune_summary(result)
