"""`yokebot runbooks list|show ID|match ALERT.json [--agent NAME]` (docs/knowledge.md): the agents' runbook
catalogs (their runbooks/ folders and YOKEBOT_RUNBOOKS_DIR), read as `yokebot run` reads them."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from bot.commands.support import err, out, settings_or_exit
from bot.engine.errors import YokebotError

if TYPE_CHECKING:
    from bot.engine.spec import AgentProfile, Runbook

runbooks_app = typer.Typer(help="Runbooks: the agents' runbooks/ folders and YOKEBOT_RUNBOOKS_DIR "
                                "(docs/knowledge.md).", no_args_is_help=True)
AgentOption = Annotated[str | None, typer.Option("--agent", "-a", help="Only this agent's runbooks.")]


def _shown(text: str) -> str:
    """File text for the terminal: control characters as U+FFFD, no Rich markup."""
    from bot.redact import printable

    return escape(printable(text))


def _profiles(agent: str | None) -> dict[str, AgentProfile]:
    from bot.app import find_profile, load_profiles
    from bot.tools import builtin_tools

    settings = settings_or_exit()
    loader_log, quiet = logging.getLogger("bot.engine.spec.runbooks"), logging.Filter("-")  # matches no record
    loader_log.addFilter(quiet)  # the files that did not load are listed by the command, not logged too
    try:
        profiles = load_profiles(settings, builtin_tools())
        if agent is not None:
            return {agent: find_profile(profiles, settings.agents_dir, agent)}
    except YokebotError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    finally:
        loader_log.removeFilter(quiet)
    return profiles


def _problems(profiles: dict[str, AgentProfile]) -> list[str]:
    return list(dict.fromkeys(p for profile in profiles.values() for p in profile.runbooks.problems))


def _where(r: Runbook) -> str:
    return "shared" if r.shared else "own"


@runbooks_app.command("list")
def runbooks_list(agent: AgentOption = None) -> None:
    """Every runbook: its id, which agents have it, its title and `match`; then the files that did not load."""
    profiles = _profiles(agent)
    holders: dict[str, tuple[Runbook, list[str]]] = {}
    for name, profile in profiles.items():
        for r in profile.runbooks.runbooks:
            holders.setdefault(r.path, (r, []))[1].append(name)
    problems = _problems(profiles)
    if not holders and not problems:
        out.print("No runbooks: put Markdown files with title, description and match in agents/<name>/runbooks/ "
                  "or in YOKEBOT_RUNBOOKS_DIR (docs/knowledge.md).")
        return
    table = Table("id", "agents", "title", "match")
    for r, names in sorted(holders.values(), key=lambda h: (h[0].id, h[0].path)):
        table.add_row(_shown(r.id), ", ".join(names) + (" (shared)" if r.shared else ""), _shown(r.title),
                      _shown(r.matcher))
    if holders:
        out.print(table)
    for problem in problems:
        err.print(f"[yellow]not loaded:[/yellow] {_shown(problem)}", highlight=False)
    if problems:
        raise typer.Exit(1)


@runbooks_app.command("show")
def runbooks_show(runbook: Annotated[str, typer.Argument(help="The runbook's id (its file name without .md).")],
                  agent: AgentOption = None) -> None:
    """One runbook as the agents have it: title, description, match, tags, file, and its text."""
    profiles = _profiles(agent)
    found = {r.path: (r, name) for name, p in sorted(profiles.items()) for r in p.runbooks.runbooks if r.id == runbook}
    if not found:
        known = sorted({r.id for p in profiles.values() for r in p.runbooks.runbooks})
        err.print(f"[red]error:[/red] no runbook {escape(runbook)!r}"
                  + (f" (runbooks: {escape(', '.join(known))})" if known else " (there are none)"), highlight=False)
        raise typer.Exit(1)
    for r, name in found.values():
        out.print(f"[bold]{_shown(r.id)}[/bold]: {_shown(r.title)}  ({escape(r.path)}; agent {escape(name)}"
                  f"{', shared' if r.shared else ''})", highlight=False)
        out.print(_shown(r.description), highlight=False)
        out.print(f"match: {_shown(r.matcher)}" + (f"  tags: {_shown(', '.join(r.tags))}" if r.tags else ""),
                  highlight=False)
        out.print("")
        out.print(_shown(r.text), highlight=False)


def _why(r: Runbook, sets: list[dict[str, str]]) -> str:
    """The labels of the first alert it fits, as `name="value"`."""
    labels = next(s for s in sets if r.fits(s))
    return ", ".join(f"{m.label}={json.dumps(labels[m.label])}" for m in r.match)


@runbooks_app.command("match")
def runbooks_match(
    file: Annotated[Path, typer.Argument(help="A saved Alertmanager or Grafana webhook body (JSON).")],
    agent: AgentOption = None,
) -> None:
    """Which runbooks an alert would get, and why (the labels that fit each `match`), per agent; and whether its
    runbook_url page would be fetched. Nothing is fetched, posted or stored."""
    from bot.alerts.knowledge import page_settings, runbook_urls
    from bot.alerts.routing import label_sets
    from bot.commands.alerts import saved_notification
    from bot.engine.errors import ToolDenied
    from bot.redact import SecretRedactor
    from bot.tools.http_check import check_url

    n = saved_notification(file, SecretRedactor(settings_or_exit().secret_values()))
    profiles = _profiles(agent)
    sets = label_sets(n)
    any_match = False
    for name, profile in sorted(profiles.items()):
        matched = profile.runbooks.matching(sets)
        any_match = any_match or bool(matched)
        out.print(f"[bold]{escape(name)}[/bold]: " + (f"{len(matched)} runbook(s)" if matched else "no runbook"),
                  highlight=False)
        for r in matched:
            out.print(f"  {_shown(r.id)} ({_where(r)}): {_shown(r.title)}; fits {_shown(_why(r, sets))} "
                      f"({_shown(r.matcher)})", highlight=False)
        for url in runbook_urls(n):
            try:
                check_url(url, page_settings(profile.runbooks.spec.fetch))
                verdict = "would be fetched (its host's addresses are checked when it is)"
            except ToolDenied as exc:
                verdict = f"not fetched: {exc.reason}"
            out.print(f"  runbook_url {_shown(url)}: {_shown(verdict)}", highlight=False)
    if not any_match:
        raise typer.Exit(1)
