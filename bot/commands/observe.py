"""`yokebot sessions`, `yokebot trace` and `yokebot usage` (`sessions_app`,
`observe_app`: listed in bot/cli.py's COMMANDS).
Like `chat` and `ask`, they bring a database that is behind up to the current schema first, so a fresh
install answers "no sessions" rather than "no such table"."""

from __future__ import annotations

from datetime import datetime
from types import ModuleType
from typing import Annotated, Any, TypeVar

import typer

from bot.commands.support import run_async, terminal, with_engine
from bot.observability.timeparse import parse_since

T = TypeVar("T")


def _render() -> ModuleType:
    from bot.observability import render

    return render

SinceOpt = Annotated[str | None, typer.Option("--since", metavar="WHEN",
                                              help="Since: 7d, 12h, 1h30m (m is minutes) or 2025-01-31 (UTC).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table (for scripts).")]


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
    items = with_engine(lambda engine, _: list_sessions(
        engine, platform=platform, channel=channel, agent=agent, since=cutoff, limit=limit))
    if as_json:
        print(_render().sessions_json(items))
    elif not items:
        terminal().print("No sessions match. Talk to an agent (`yokebot chat`, `yokebot ask`) and look again.")
    else:
        terminal().print(_render().sessions_table(items))


def sessions_reset(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix), from `yokebot sessions`.")],
) -> None:
    """Forget a session's conversation: its next turn starts afresh, like `reset` typed in the chat.

    Long-term memories and the audit trail (`yokebot trace`) stay."""
    from bot.observability.queries import reset_session

    found = with_engine(lambda engine, _: reset_session(engine, session))
    terminal().print(f"Session {found.id} ({found.platform} {_render().where(found.channel, found.thread)}): "
                 "memory reset; its next turn starts afresh.", highlight=False, markup=False)


def trace(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix), from `yokebot sessions`.")],
    turn: Annotated[int | None, typer.Option("--turn", "-t", help="Only turn N (1 first, -1 last).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show what happened in a session: each turn as a tree of model calls and tool calls, then the answer."""
    from bot.observability.queries import trace as load_trace

    result = with_engine(lambda engine, _: load_trace(engine, session, turn))
    if as_json:
        print(_render().trace_json(result))
        return
    out = terminal()
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
    """Model calls, tokens and estimated cost (YOKEBOT_MODEL_PRICES), tool calls by status, and each spend cap
    with what is spent of it."""
    import json

    from bot.app import load_profiles
    from bot.engine.errors import YokebotError
    from bot.observability.usage import usage as load_usage
    from bot.tools import builtin_tools

    cutoff = _since(since)
    unread: list[str] = []  # a profile that cannot be loaded: the caps are not shown, the rest is

    async def report_on(engine: Any, settings: Any) -> Any:
        try:
            profiles = load_profiles(settings, builtin_tools()).values() if settings.agents_dir.is_dir() else ()
        except YokebotError as exc:
            profiles = ()
            unread.append(str(exc))
        return await load_usage(engine, by=by, since=cutoff, prices=settings.model_prices, profiles=profiles,
                                daily_usd=settings.spend_daily_usd)

    report = with_engine(report_on)
    if as_json:
        doc = _render().usage_dict(report)
        print(json.dumps({**doc, "caps_not_shown": unread[0]} if unread else doc, indent=2))
        return
    out = terminal()
    for table in _render().usage_tables(report):
        out.print(table)
    if unread:
        out.print(f"Spend caps not shown: {unread[0]}", markup=False, highlight=False)


sessions_app = typer.Typer(no_args_is_help=False)
sessions_app.callback(invoke_without_command=True)(sessions)
sessions_app.command("reset")(sessions_reset)
observe_app = typer.Typer()  # top-level: `yokebot trace`, `yokebot usage`
observe_app.command("trace")(trace)
observe_app.command("usage")(usage)
