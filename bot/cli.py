"""The `yokebot` command line (also `python -m bot`)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from bot.config import Settings
from bot.engine.errors import YokebotError
from bot.scheduling.cli import schedule_app

T = TypeVar("T")
app = typer.Typer(help="yokebot: a self-hosted chat-ops agent for Slack and Discord.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
agents_app = typer.Typer(help="Inspect agent profiles (agents/<name>/AGENT.md).", no_args_is_help=True)
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
app.add_typer(agents_app, name="agents")
app.add_typer(db_app, name="db")
app.add_typer(schedule_app, name="schedule")

out = Console()
err = Console(stderr=True)

AgentOpt = Annotated[
    str | None, typer.Option("--agent", "-a", help="Agent profile to use (default: YOKEBOT_DEFAULT_AGENT).")
]


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


@app.command()
def chat(
    agent: AgentOpt = None,
    new: Annotated[bool, typer.Option("--new", help="Start a fresh conversation instead of continuing.")] = False,
) -> None:
    """Talk to an agent in the terminal. The conversation continues across restarts (same session)."""
    from bot.app import build_app
    from bot.chat.console_adapter import ConsoleAdapter

    settings = settings_or_exit()
    setup_logging(settings, quiet=True)

    async def main() -> None:
        bot = await build_app(settings)
        try:
            name = agent or settings.default_agent
            bot.profile(name)
            thread = f"{name}:{uuid.uuid4().hex[:8]}" if new else name
            await ConsoleAdapter(bot.service, name, out, thread=thread).repl()
        finally:
            await bot.close()

    run_async(main)


@app.command()
def ask(
    text: Annotated[str, typer.Argument(help="What to ask the agent.")],
    agent: AgentOpt = None,
    session: Annotated[str | None, typer.Option("--session", "-s", help="Continue this session id.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the turn as JSON (answer, trace).")] = False,
) -> None:
    """Run one turn and print the answer (or, with --json, the answer and the tool-call trace)."""
    from bot.app import build_app
    from bot.engine.service import TurnRequest

    settings = settings_or_exit()
    setup_logging(settings, quiet=True)

    async def main() -> Any:
        bot = await build_app(settings)
        try:
            name = agent or settings.default_agent
            if session is None:
                bot.profile(name)
            req = TurnRequest(platform="cli", channel="ask", thread=uuid.uuid4().hex, text=text, agent=name,
                              trigger="cli", user="cli", session_id=session)
            return await bot.service.handle(req)
        finally:
            await bot.close()

    result = run_async(main)
    if as_json:
        print(result.to_json())
    else:
        out.print(result.answer, markup=False, highlight=False)
        err.print(f"[dim]session {result.session_id} · {result.iterations} model call(s) · "
                  f"{len(result.tool_calls)} tool call(s)[/dim]")
    if result.error:
        raise typer.Exit(3)


@app.command()
def run() -> None:
    """Start every configured adapter, the scheduler and the HTTP server; stop cleanly on SIGTERM."""
    from bot.runner import serve

    settings = settings_or_exit()
    setup_logging(settings)
    run_async(lambda: serve(settings))


@agents_app.command("list")
def agents_list() -> None:
    """List the agent profiles and what they can do."""
    from bot.app import load_profiles
    from bot.tools import builtin_tools

    settings = settings_or_exit()
    try:
        profiles = load_profiles(settings, builtin_tools())
    except YokebotError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    table = Table("agent", "model", "tools", "description")
    for p in profiles.values():
        table.add_row(p.name, p.model or f"{settings.model} (default)", ", ".join(p.tools) or "-", p.description)
    out.print(table)


@agents_app.command("show")
def agents_show(name: Annotated[str, typer.Argument(help="Agent name.")]) -> None:
    """Show one profile: settings, tools with their sandbox policy, and the full system prompt."""
    from bot.engine.profiles import ProfileLoader
    from bot.engine.prompt import PromptBuilder
    from bot.tools import builtin_tools

    settings = settings_or_exit()
    try:
        profile = ProfileLoader(settings.agents_dir, builtin_tools()).load(name)
    except YokebotError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    out.print(f"[bold]{profile.name}[/bold]  ({profile.path})")
    out.print(f"model: {profile.model or settings.model}   max_iterations: {profile.max_iterations}   "
              f"max_history_turns: {profile.max_history_turns}   timezone: {profile.timezone}")
    for tname, tsettings in profile.tools.items():
        out.print(f"tool [cyan]{tname}[/cyan]: {tsettings.model_dump(exclude_defaults=True) or 'defaults'}")
    if profile.notify.default:
        out.print(f"notify: {profile.notify.default} (allowed also: {', '.join(profile.notify.allowed) or '-'})")
    out.rule("system prompt")
    out.print(PromptBuilder().system_prompt(profile), markup=False, highlight=False)


@db_app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument(help="Target revision.")] = "head") -> None:
    """Apply the database migrations (the embedded SQLite database is also migrated on first start)."""
    from bot.store.db import create_engine, upgrade

    settings = settings_or_exit()

    async def main() -> None:
        engine = create_engine(settings.database_url)
        try:
            await upgrade(engine, revision)
        finally:
            await engine.dispose()

    run_async(main)
    out.print(f"database at {settings.database_url.split('@')[-1]} is at revision {revision}")


def main() -> None:
    app()


def _register_observability() -> None:
    from bot.observability.cli import register

    register(app, db_app)  # sessions, trace, usage, db prune


_register_observability()


def _register_eval() -> None:
    from bot.eval.cli import register

    register(app)  # eval


_register_eval()
