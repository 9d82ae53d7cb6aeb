"""`yokebot chat` and `yokebot ask`: an agent in the terminal, a conversation or one turn."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from bot.commands.support import chat_log, err, out, run_async, settings_or_exit, setup_logging

if TYPE_CHECKING:  # what a command needs loads when it runs: `yokebot --help` imports no SQLAlchemy, no SDKs
    from bot.app import App
    from bot.config import Settings
    from bot.engine.messages import TurnResult
    from bot.engine.spec import ToolSettings

terminal_app = typer.Typer()  # its commands are top-level: `yokebot chat`, `yokebot ask`

AgentOpt = Annotated[
    str | None, typer.Option("--agent", "-a", help="Agent profile to use (default: YOKEBOT_DEFAULT_AGENT).")
]


@terminal_app.command()
def chat(
    agent: AgentOpt = None,
    new: Annotated[bool, typer.Option("--new", help="Start a fresh conversation instead of continuing.")] = False,
) -> None:
    """Talk to an agent in the terminal. The conversation continues across restarts (same session); /help lists
    the commands (/new, /reset, /file PATH, /status, /usage, /quit…), which never reach the model."""
    settings = settings_or_exit()
    run_chat(settings, agent or settings.default_agent, new)


def run_chat(settings: Settings, name: str, new: bool = False) -> None:
    """The terminal conversation with agent `name` (`yokebot chat`, and `yokebot demo` on its demo agent)."""
    from bot.app import build_app, posting
    from bot.chat.console.adapter import ConsoleAdapter, TerminalAlerts
    from bot.chat.console.approvals import ConsoleApprover
    from bot.chat.platforms import hints
    from bot.commands.support import where_from
    from bot.engine.model import preload
    from bot.facts import SqlCommandFacts
    from bot.tools.isolation import not_dumpable

    not_dumpable()  # same-user processes (an MCP server, a shell command) cannot read our /proc entries
    agent_or_exit(settings, name)
    found = where_from(settings, name)  # before the database file is made
    log_stream = chat_log(settings)

    async def main() -> int | None:
        # only this agent's MCP servers start; notify shows here the alerts no adapter of this process can post
        bot = await build_app(settings, metrics=False, mcp_for={name}, fallback=TerminalAlerts(out, hints()))
        try:
            profile = bot.profile(name)
            thread = f"{name}:{uuid.uuid4().hex[:8]}" if new else name
            preload()  # the model SDK loads in a thread while the prompt waits for the first line
            going_on = () if new else await continuing(bot, name, thread)
            console = ConsoleAdapter(bot.service, name, out, thread=thread,
                                     info=(found[0], *going_on), notes=(*found[1:], *shell_notes(profile.tools)),
                                     facts=SqlCommandFacts(bot.engine, bot.approvals, settings.model_prices))
            bot.approvals.register_inline("console", ConsoleApprover(out, console.ask_user))  # gated tools ask here
            async with posting(bot):  # notify posts where a token is set, as `yokebot run` would
                await console.repl()
            return console.stop_signal
        finally:
            await bot.close()
            log_stream.close()

    stopped_by = run_async(main)
    if stopped_by is not None:  # SIGTERM or SIGHUP: the conventional status of a process ended by a signal
        raise typer.Exit(128 + stopped_by)


async def continuing(bot: App, agent: str, thread: str) -> tuple[str, ...]:
    """The line `chat` starts with when it continues a conversation: which session, how many turns."""
    from bot.observability.queries import list_sessions

    for s in await list_sessions(bot.engine, platform="console", channel="terminal", agent=agent, limit=100):
        if s.thread == thread and s.turns:
            return (f"continuing session {s.id[:4]}…, {s.turns} turn{'s' if s.turns != 1 else ''}; "
                    "/new starts afresh, /help lists the commands",)
    return ()


def shell_notes(tools: Mapping[str, ToolSettings]) -> tuple[str, ...]:
    """The line `chat` prints at start when this agent's `shell` is refused here (no working bubblewrap)."""
    from bot.tools.isolation import probe
    from bot.tools.shell import shell_settings

    shell = shell_settings(tools)
    if shell is None or shell.isolation != "required" or probe().available:
        return ()
    return (f"shell is refused for this agent: {probe().detail}. Its other tools work; `yokebot doctor` says "
            "more (docs/sandbox.md).",)


@terminal_app.command()
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
    from bot.app import build_app, posting
    from bot.chat.console.adapter import TerminalAlerts
    from bot.chat.console.approvals import CliApprover
    from bot.chat.core.attachments import LocalFile
    from bot.chat.platforms import hints
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
    from bot.commands.support import where_from

    for note in where_from(settings, agent or settings.default_agent)[1:]:  # a new database: said, on stderr
        err.print(f"[yellow]{escape(note)}[/yellow]", highlight=False, soft_wrap=True)

    async def main() -> TurnResult:
        name = agent or settings.default_agent
        # only this agent's MCP servers start (a continued session may be another agent's: then all of them)
        # notify: posted where the platform's token is set, else shown on stderr (stdout is the answer)
        bot = await build_app(settings, metrics=False, mcp_for={name} if session is None else None,
                              fallback=TerminalAlerts(err, hints()))
        bot.approvals.register_inline("cli", approver)
        try:
            if session is None:
                bot.profile(name)
            req = TurnRequest(platform="cli", channel="ask", thread=uuid.uuid4().hex, text=text, agent=name,
                              trigger="cli", user="cli", session_id=session,
                              attachments=tuple(LocalFile(p) for p in files or ()))
            async with posting(bot):
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


def show_result(result: TurnResult, as_json: bool) -> None:
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
            "(unset, yokebot uses ./agents, else the agents installed with it: ops, logs, metrics, host, reporter).")


