"""The `yokebot` command line (also `python -m bot`)."""

from __future__ import annotations

import logging
import sys
import textwrap
import uuid
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from bot.commands.alerts import alerts_app
from bot.commands.db import db_app
from bot.commands.eval import register as register_eval
from bot.commands.observe import register as register_observability
from bot.commands.schedule import schedule_app
from bot.commands.support import chat_log, err, out, run_async, settings_or_exit, setup_logging
from bot.engine.errors import YokebotError
from bot.mcp.cli import mcp_app

if TYPE_CHECKING:  # what a command needs loads when it runs: `yokebot --help` imports no SQLAlchemy, no SDKs
    from bot.config import Settings

__all__ = ["app", "main", "run_async", "settings_or_exit", "setup_logging"]
app = typer.Typer(help="yokebot: a self-hosted chat-ops agent for Slack and Discord.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
agents_app = typer.Typer(help="Inspect agent profiles (agents/<name>/AGENT.md).", no_args_is_help=True)
app.add_typer(agents_app, name="agents")
app.add_typer(db_app, name="db")
app.add_typer(schedule_app, name="schedule")
app.add_typer(mcp_app, name="mcp")
app.add_typer(alerts_app, name="alerts")  # bot/commands/alerts.py

AgentOpt = Annotated[
    str | None, typer.Option("--agent", "-a", help="Agent profile to use (default: YOKEBOT_DEFAULT_AGENT).")
]


@app.command()
def chat(
    agent: AgentOpt = None,
    new: Annotated[bool, typer.Option("--new", help="Start a fresh conversation instead of continuing.")] = False,
) -> None:
    """Talk to an agent in the terminal. The conversation continues across restarts (same session)."""
    from bot.app import build_app
    from bot.chat.console.adapter import ConsoleAdapter, TerminalAlerts
    from bot.chat.console.approvals import ConsoleApprover
    from bot.engine.model import preload
    from bot.tools.isolation import not_dumpable

    settings = settings_or_exit()
    not_dumpable()  # same-user processes (an MCP server, a shell command) cannot read our /proc entries
    agent_or_exit(settings, agent or settings.default_agent)
    log_stream = chat_log(settings)

    async def main() -> int | None:
        name = agent or settings.default_agent
        bot = await build_app(settings, metrics=False, mcp_for={name})  # only this agent's MCP servers start
        try:
            profile = bot.profile(name)
            bot.notifier.fallback = TerminalAlerts(out)  # notify shows alerts no adapter here can post
            thread = f"{name}:{uuid.uuid4().hex[:8]}" if new else name
            preload()  # the model SDK loads in a thread while the prompt waits for the first line
            console = ConsoleAdapter(bot.service, name, out, thread=thread, notes=shell_notes(profile.tools))
            if bot.approvals is not None:  # gated tools ask right here (y/N)
                bot.approvals.register_inline("console", ConsoleApprover(out, console.ask_user))
            await console.repl()
            return console.stop_signal
        finally:
            await bot.close()
            log_stream.close()

    stopped_by = run_async(main)
    if stopped_by is not None:  # SIGTERM or SIGHUP: the conventional status of a process ended by a signal
        raise typer.Exit(128 + stopped_by)


def shell_notes(tools: Any) -> tuple[str, ...]:
    """The line `chat` prints at start when this agent's `shell` is refused here (no working bubblewrap)."""
    from bot.tools.isolation import probe

    shell = tools.get("shell")
    if shell is None or getattr(shell, "isolation", "required") != "required" or probe().available:
        return ()
    return (f"shell is refused for this agent: {probe().detail}. Its other tools work; `yokebot doctor` says "
            "more (docs/sandbox.md).",)


@app.command()
def ask(
    text: Annotated[str, typer.Argument(help="What to ask the agent; `-` reads it from standard input.")],
    agent: AgentOpt = None,
    session: Annotated[str | None, typer.Option("--session", "-s", help="Continue this session id.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the turn as JSON (answer, trace).")] = False,
    approve: Annotated[bool, typer.Option(
        "--approve", help="Approve the tool calls that need a human's approval, as the terminal user "
                          "(without it, they are refused).")] = False,
    files: Annotated[list[str] | None, typer.Option(
        "--file", "-f", help="Attach a file (a log, a snippet, a screenshot) to the question; repeatable. "
                             "See docs/attachments.md.")] = None,
) -> None:
    """Run one turn and print the answer (or, with --json, the answer and the tool-call trace)."""
    from bot.app import build_app
    from bot.chat.console.approvals import CliApprover
    from bot.chat.core.attachments import LocalFile
    from bot.engine.service import TurnRequest

    approver = CliApprover(approve)
    if text == "-":  # `journalctl -n 50 | yokebot ask -`
        text = sys.stdin.read()
        if not text.strip():
            err.print("[red]error:[/red] nothing to ask: standard input was empty.", highlight=False)
            raise typer.Exit(2)

    from bot.tools.isolation import not_dumpable

    settings = settings_or_exit()
    not_dumpable()
    setup_logging(settings, quiet=True)
    if session is None:
        agent_or_exit(settings, agent or settings.default_agent)

    async def main() -> Any:
        name = agent or settings.default_agent
        # only this agent's MCP servers start (a continued session may be another agent's: then all of them)
        bot = await build_app(settings, metrics=False, mcp_for={name} if session is None else None)
        if bot.approvals is not None:
            bot.approvals.register_inline("cli", approver)
        try:
            if session is None:
                bot.profile(name)
            req = TurnRequest(platform="cli", channel="ask", thread=uuid.uuid4().hex, text=text, agent=name,
                              trigger="cli", user="cli", session_id=session,
                              attachments=tuple(LocalFile(p) for p in files or ()))
            result = await bot.service.handle(req)
            show_result(result, as_json)  # before closing: a close flushes traces (up to 5 s if a collector is down)
            return result
        finally:
            await bot.close()

    result = run_async(main)
    for name in dict.fromkeys(approver.refused):
        err.print(f"[yellow]{name} needs a human's approval, so it was not run; run the command again with "
                  "--approve to approve it yourself, or use `yokebot chat`.[/yellow]")
    if result.error:
        raise typer.Exit(3)


def show_result(result: Any, as_json: bool) -> None:
    if as_json:
        from bot.redact import printable_json

        print(printable_json(result.to_json()), flush=True)
    else:
        print_answer(result.answer)
        err.print(f"[dim]session {result.session_id} · {result.iterations} model call(s) · "
                  f"{len(result.tool_calls)} tool call(s)[/dim]")


def print_answer(answer: str) -> None:
    """Piped or redirected: the text as the model wrote it, but for control, bidi and zero-width characters
    (`printable`: a pipe often ends on a terminal too). On a terminal: no markup, no emoji codes."""
    if out.is_terminal:
        from bot.chat.console import view as console_view

        console_view.print_text(out, console_view.answer(answer))
    else:
        from bot.redact import printable

        answer = printable(answer)
        sys.stdout.write(answer if answer.endswith("\n") else answer + "\n")
        sys.stdout.flush()


@app.command()
def run() -> None:
    """Start every configured adapter, the scheduler and the HTTP server; stop cleanly on SIGTERM.

    Messages acknowledged but cut short by a crash are answered after the restart (or by another instance).
    On SQLite, one `yokebot run` per database file; to run several, use PostgreSQL (docs/scale-out.md)."""
    import errno

    from bot.observability.http import NO_PLATFORM
    from bot.runner import serve
    from bot.tools.isolation import not_dumpable

    settings = settings_or_exit()
    not_dumpable()
    setup_logging(settings)
    if settings.slack_bot_token is None and settings.discord_bot_token is None:
        logging.getLogger("bot.cli").warning("%s.", NO_PLATFORM[0].upper() + NO_PLATFORM[1:])
    try:
        run_async(lambda: serve(settings))
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        err.print(f"[red]error:[/red] port {settings.http_port} is already in use; stop the other process or set "
                  "YOKEBOT_HTTP_PORT to a free port.", highlight=False)
        raise typer.Exit(1) from None


def agent_or_exit(settings: Settings, name: str) -> None:
    """Before any database is opened (a SQLite file would be created): is there an agent of that name?"""
    base = settings.agents_dir.expanduser()
    if (base / name / "AGENT.md").is_file():
        return
    known = sorted(p.parent.name for p in base.glob("*/AGENT.md")) if base.is_dir() else []
    if not known:
        err.print(f"[red]error:[/red] {escape(no_agents(settings))}", highlight=False)
    else:
        err.print(f"[red]error:[/red] {escape(f'No agent named {name!r} in {base.resolve()} (known agents: ')}"
                  f"{escape(', '.join(known))}).", highlight=False)
    raise typer.Exit(1)


def no_agents(settings: Settings) -> str:
    where = settings.agents_dir.expanduser().resolve()
    found = "does not exist" if not where.is_dir() else "holds no <name>/AGENT.md"
    return (f"No agent profiles: {where} {found}. Set YOKEBOT_AGENTS_DIR to the folder with your agents "
            "(the checkout's agents/ folder has ops, reporter and host), or run yokebot from the checkout.")


@app.command()
def doctor() -> None:
    """Check the model endpoint, the database, the Slack/Discord tokens and the agents; say what to fix.

    The model check also asks the endpoint whether it serves the model. Also checked: the shell sandbox
    (bubblewrap), each Prometheus the agents query, and each MCP server they declare (started once; a
    server that dies shows its last stderr lines). Nothing is written.

    Exits 1 when something would stop yokebot from answering."""
    from bot.doctor import run_checks

    settings = settings_or_exit()
    setup_logging(settings, quiet=True)
    checks = run_async(lambda: run_checks(settings))
    for check in checks:
        mark = "[yellow]![/yellow]" if check.warning else ("[green]✓[/green]" if check.ok else "[red]✗[/red]")
        out.print(f"{mark} {escape(check.name)}: {escape(check.detail)}", highlight=False, soft_wrap=True)
        if check.fix:
            out.print(f"    [dim]fix:[/dim] {escape(check.fix)}", highlight=False, soft_wrap=True)
    failed = [c for c in checks if not c.ok]
    if failed:
        err.print(f"[red]{len(failed)} problem(s) to fix[/red] before yokebot can answer.", highlight=False)
        raise typer.Exit(1)
    out.print("Ready.", highlight=False)


@agents_app.command("list")
def agents_list() -> None:
    """List the agent profiles and what they can do."""
    from bot.app import load_profiles
    from bot.tools import builtin_tools

    settings = settings_or_exit()
    try:
        profiles = load_profiles(settings, builtin_tools())
    except YokebotError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    if not profiles:
        err.print(f"[red]error:[/red] {escape(no_agents(settings))}", highlight=False)
        raise typer.Exit(1)
    table = Table("agent", "model", "tools", "description")
    for p in profiles.values():
        table.add_row(p.name, p.model or f"{settings.model} (default)", ", ".join(p.tools) or "-", p.description)
    out.print(table)


@agents_app.command("show")
def agents_show(name: Annotated[str, typer.Argument(help="Agent name.")]) -> None:
    """Show one profile: settings, tools with their sandbox policy, and the full system prompt."""
    from bot.engine.context import PromptBuilder
    from bot.engine.spec import ProfileLoader
    from bot.tools import builtin_tools
    from bot.tools.isolation import shell_isolation

    settings = settings_or_exit()
    if not settings.agents_dir.expanduser().is_dir():
        err.print(f"[red]error:[/red] {escape(no_agents(settings))}", highlight=False)
        raise typer.Exit(1)
    try:
        profile = ProfileLoader(settings.agents_dir, builtin_tools()).load(name)
    except YokebotError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    out.print(f"[bold]{profile.name}[/bold]  ({profile.path})")
    out.print(f"model: {profile.model or settings.model}   max_iterations: {profile.max_iterations}   "
              f"max_history_turns: {profile.max_history_turns}   timezone: {profile.timezone}")
    out.print(context_line(profile, profile.model or settings.model), markup=False, highlight=False)
    for tname, tsettings in profile.tools.items():
        policy = tsettings.model_dump(mode="json", exclude_defaults=True)
        out.print(f"tool [cyan]{tname}[/cyan]:" + ("" if policy else " defaults"), highlight=False)
        if policy:
            out.print(textwrap.indent(policy_yaml(policy), "  "), markup=False, highlight=False, soft_wrap=True)
    for sname, spec in profile.mcp.items():
        where = spec.url if spec.url else " ".join((spec.command or "", *spec.args))
        out.print(f"mcp server [cyan]{sname}[/cyan] ({spec.transport}: {where}): "
                  f"{', '.join(spec.allowed()) or 'no tools allowed'}  [dim](yokebot mcp tools {profile.name} "
                  f"{sname} lists what it offers)[/dim]", highlight=False)
    if (isolation := shell_isolation(profile.tools)) is not None:
        out.print(f"shell: {isolation}", markup=False, highlight=False)
    out.rule("system prompt")
    out.print(PromptBuilder().system_prompt(profile), markup=False, highlight=False)


def policy_yaml(policy: dict[str, Any]) -> str:
    """A tool's sandbox policy as the YAML it is written in (AGENT.md), not as Python reprs."""
    import yaml

    # types-PyYAML types safe_dump's `**kwds` loosely: partly unknown under strict, a stub's gap
    dumped: str = yaml.safe_dump(  # pyright: ignore[reportUnknownMemberType]
        policy, sort_keys=False, default_flow_style=None, width=1_000_000)
    return dumped.rstrip()


def context_line(profile: Any, model: str) -> str:
    """The window and budgets of a profile, as `agents show` prints them (docs/context.md)."""
    from bot.engine.context import default_window

    window = profile.context_window or default_window(model)
    source = "set" if profile.context_window else "default for the model"
    budgets = profile.budget.model_dump(exclude_none=True)
    limits = ", ".join(f"{k} {v}" for k, v in budgets.items()) or "none"
    return (f"context window: {window:,} tokens ({source})   compact at: {profile.context.compact_at:.0%}   "
            f"loop guard: {profile.loop_repeats} repeats   budgets per turn: {limits}")


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


register_observability(app)  # sessions, trace, usage
register_eval(app)  # eval
