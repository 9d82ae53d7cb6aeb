"""`yokebot schedule ...`: list, add, remove, pause, resume, run, history."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Annotated, Any, Literal

import typer

from bot.commands import support

schedule_app = typer.Typer(help="Scheduled agents: list, add, pause, run now, history.", no_args_is_help=True)

NameArg = Annotated[
    str,
    typer.Argument(
        help="Schedule name (agent/name for profile schedules; the short name works when it is unique)."
    ),
]


@asynccontextmanager
async def _opened(read_only: bool = False) -> AsyncGenerator[Any, None]:
    """(store, profiles): the schedule store on the configured database, the profiles' schedules synced in.
    `read_only`: a missing SQLite file is not created (an empty in-memory database stands in)."""
    from bot.app import load_profiles, open_store
    from bot.commands.support import readable_url
    from bot.scheduling.setup import profile_schedules
    from bot.scheduling.store import ScheduleStore
    from bot.tools import builtin_tools

    settings = support.settings_or_exit()
    if read_only:
        settings = settings.model_copy(update={"database_url": readable_url(settings)})
    profiles = load_profiles(settings, builtin_tools())
    engine, _ = await open_store(settings)
    try:
        store = ScheduleStore(engine)
        await store.sync_profiles(profile_schedules(profiles))
        yield store, profiles
    finally:
        await engine.dispose()


def _when_local(value: Any, tz: str) -> str:
    from zoneinfo import ZoneInfo

    return value.astimezone(ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M:%S %Z") if value else "-"


@schedule_app.command("list")
def schedule_list() -> None:
    """Every schedule (from profiles and added at run time), its state, next and last run."""
    from rich.table import Table

    from bot.scheduling.model import build_trigger, next_fire, utcnow

    async def main() -> tuple[list[Any], dict[str, Any]]:
        async with _opened(read_only=True) as (store, _):
            return await store.all(), await store.last_runs()

    schedules, last = support.run_async(main)
    if not schedules:
        support.out.print(
            "No schedules. Declare them in a profile (schedules:) or use `yokebot schedule add`."
        )
        return
    table = Table("schedule", "agent", "when", "post to", "state", "next run", "last run")
    for s in schedules:
        upcoming = next_fire(build_trigger(s), utcnow()) if s.active else None
        run = last.get(s.name)
        last_text = f"{run.status} ({_when_local(run.planned_at, s.timezone)})" if run else "-"
        table.add_row(
            s.name,
            s.agent,
            s.when,
            s.post_to or "(log)",
            s.state,
            _when_local(upcoming, s.timezone),
            last_text,
        )
    support.out.print(table)


@schedule_app.command("add")
def schedule_add(
    name: Annotated[str, typer.Argument(help="A new name: lowercase letters, digits, - and _.")],
    agent: Annotated[str, typer.Option("--agent", "-a", help="The agent that runs it.")],
    prompt: Annotated[str, typer.Option("--prompt", "-p", help="What the agent is asked each time.")],
    cron: Annotated[str | None, typer.Option("--cron", help="Crontab: 'min hour day month weekday'.")] = None,
    every: Annotated[str | None, typer.Option("--every", help="An interval: 30s, 15m, 1h30m, 1d.")] = None,
    timezone: Annotated[
        str | None, typer.Option("--timezone", help="For cron (default: the agent's).")
    ] = None,
    post_to: Annotated[
        str | None, typer.Option("--post-to", help="Where the report goes, like slack:#ops.")
    ] = None,
    session: Annotated[
        Literal["per_run", "rolling"],
        typer.Option(
            "--session", help="per_run: a fresh session each run; rolling: one session that remembers."
        ),
    ] = "per_run",
) -> None:
    """Add a schedule at run time (kept in the database; a running `yokebot run` picks it up)."""
    from pydantic import ValidationError

    from bot.chat.platforms import names
    from bot.engine.spec import ScheduleSpec, platform_context
    from bot.scheduling.model import Schedule, ScheduleError

    try:
        fields = {"name": name, "cron": cron, "every": every, "timezone": timezone, "prompt": prompt,
                  "post_to": post_to, "session": session}
        spec = ScheduleSpec.model_validate(fields, context=platform_context(names()))  # as the profile loader does
    except ValidationError as exc:
        problem = exc.errors()[0]
        support.err.print(f"[red]error:[/red] {problem['msg'].removeprefix('Value error, ')}", highlight=False)
        raise typer.Exit(2) from None

    async def main() -> Any:
        async with _opened() as (store, profiles):
            profile = profiles.get(agent)
            if profile is None:
                known = ", ".join(sorted(profiles)) or "none"
                raise ScheduleError(f"There is no agent {agent!r} (known agents: {known}).")
            return await store.add(replace(Schedule.from_profile(profile, spec), name=spec.name, source="runtime"))

    added = support.run_async(main)
    support.out.print(f"added {added.name}: {added.when}, posting to {added.post_to or 'the log'}")


def _simple(action: str, name: str) -> None:
    async def main() -> Any:
        async with _opened() as (store, _profiles):
            if action == "remove":
                await store.remove(name)
                return name
            schedule = await store.set_paused(name, action == "pause")
            return schedule.name

    done = support.run_async(main)
    support.out.print(f"{done}: {action}d")


@schedule_app.command("remove")
def schedule_remove(name: NameArg) -> None:
    """Remove a schedule added at run time (profile schedules live in their AGENT.md)."""
    _simple("remove", name)


@schedule_app.command("pause")
def schedule_pause(name: NameArg) -> None:
    """Stop a schedule from running until resumed (planned times while paused are not caught up)."""
    _simple("pause", name)


@schedule_app.command("resume")
def schedule_resume(name: NameArg) -> None:
    """Let a paused schedule run again."""
    _simple("resume", name)


@schedule_app.command("run")
def schedule_run(name: NameArg) -> None:
    """Run a schedule once now and post its result, the way to test a schedule before trusting it."""
    from bot.app import build_app, posting
    from bot.chat.console.adapter import TerminalAlerts
    from bot.chat.platforms import hints
    from bot.scheduling.model import utcnow
    from bot.scheduling.setup import schedule_runner, synced_store

    cli = support
    settings = cli.settings_or_exit()
    cli.setup_logging(settings, quiet=True)

    async def main() -> Any:
        bot = await build_app(settings, fallback=TerminalAlerts(cli.err, hints()))
        try:
            async with posting(bot):  # post_to and notify reach the platforms whose token is set
                store, _ = await synced_store(bot)
                schedule = await store.resolve(name)
                return schedule, await schedule_runner(bot, store).run(schedule, utcnow(), kind="manual")
        finally:
            await bot.close()

    schedule, outcome = cli.run_async(main)
    cli.out.print(outcome.text, markup=False, highlight=False, soft_wrap=True)
    cli.err.print(
        f"[dim]{schedule.name}: {outcome.status} · {_where(schedule.post_to, outcome)} · "
        f"session {outcome.session_id}[/dim]",
        highlight=False,
        soft_wrap=True,
    )
    if outcome.status != "ok":
        raise typer.Exit(1)


def _where(post_to: str | None, outcome: Any) -> str:
    from bot.chat.platforms import entry
    from bot.scheduling.runs import LOG_REF

    if post_to is None:
        return "not posted: no post_to"
    if outcome.posted_ref == LOG_REF:
        platform = entry(post_to.partition(":")[0])
        hint = f" (set {platform.token_variable})" if platform is not None else ""
        return f"not posted to {post_to}: its platform is not configured in this process{hint}"
    if outcome.posted_ref is None:  # the post itself failed; its reason is the run's error when the agent succeeded
        reason = outcome.error if (outcome.error or "").startswith("posting to") else "see the log"
        return f"not posted to {post_to} ({reason})"
    return f"posted to {post_to} ({outcome.posted_ref})"


@schedule_app.command("history")
def schedule_history(
    name: NameArg,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many runs, newest first.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print the runs as JSON.")] = False,
) -> None:
    """The runs of one schedule: planned time, kind, status, session, posted message, error."""
    from rich.markup import escape
    from rich.table import Table

    async def main() -> Any:
        async with _opened(read_only=True) as (store, _profiles):
            schedule = await store.resolve(name)
            return schedule, await store.history(schedule.name, limit)

    schedule, runs = support.run_async(main)
    if as_json:
        from bot.redact import printable_json

        print(printable_json(json.dumps([_run_json(r) for r in runs], ensure_ascii=False)))
        return
    if not runs:
        support.out.print(f"{schedule.name} has not run yet.")
        return
    table = Table("planned", "kind", "status", "took", "posted", "session", "error")
    for r in runs:
        took = (
            f"{(r.finished_at - r.started_at).total_seconds():.1f}s"
            if r.finished_at and r.started_at
            else "-"
        )
        error = escape((r.error or "")[:80])  # a model's or a platform's words: text, not Rich markup
        table.add_row(
            _when_local(r.planned_at, schedule.timezone),
            r.kind,
            r.status,
            took,
            r.posted_ref or "-",
            r.session_id or "-",
            error,
        )
    support.out.print(table)


def _run_json(r: Any) -> dict[str, Any]:
    def iso(v: Any) -> str | None:
        return v.isoformat() if v else None

    return {
        "schedule": r.schedule,
        "agent": r.agent,
        "planned_at": iso(r.planned_at),
        "kind": r.kind,
        "status": r.status,
        "started_at": iso(r.started_at),
        "finished_at": iso(r.finished_at),
        "session_id": r.session_id,
        "posted_ref": r.posted_ref,
        "error": r.error,
        "runner": r.runner,
    }
