"""`yokebot alerts test FILE.json`, `yokebot alerts list` (docs/alerts.md) and `yokebot alerts history [ALERTNAME]`
(docs/knowledge.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from bot.commands.support import err, out, run_async, settings_or_exit

alerts_app = typer.Typer(help="Alert webhooks: try a saved payload against the routes; list recent groups (firing or "
                              "resolved, investigation, session); past incidents.",
                         no_args_is_help=True)


def _shown(text: str) -> str:
    """Untrusted text for the terminal: control characters as U+FFFD, no Rich markup."""
    from bot.redact import printable

    return escape(printable(text))


def _source(body: bytes) -> Any:
    from bot.alerts.payloads import decode

    data = decode(body)
    return "alertmanager" if data.get("version") == "4" else "grafana"


def saved_notification(file: Path, redact: Any) -> Any:
    """A saved webhook body, parsed and redacted as `yokebot run` does (a `Notification`); exit 2 with one sentence
    when it cannot be read or is no alert body."""
    from bot.alerts.payloads import BadPayload, parse

    try:
        body = file.read_bytes()
        return parse(_source(body), body, redact)
    except OSError as exc:
        err.print(f"[red]error:[/red] cannot read {escape(str(file))}: {escape(exc.strerror or str(exc))}")
        raise typer.Exit(2) from None
    except BadPayload as exc:
        err.print(f"[red]error:[/red] {escape(str(file))}: {escape(str(exc))}")
        raise typer.Exit(2) from None


@alerts_app.command("test")
def alerts_test(
    file: Annotated[Path, typer.Argument(help="A saved Alertmanager or Grafana webhook body (JSON).")],
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="Only this agent's routes.")] = None,
) -> None:
    """Run a saved payload through the routing as if it came in: which route matches, the root message and
    the investigation prompt with its runbooks, printed here (nothing is fetched, posted or stored)."""
    from bot.alerts import knowledge, render
    from bot.alerts.routing import route_for
    from bot.app import find_profile, load_profiles
    from bot.engine.spec import matchers_text
    from bot.redact import SecretRedactor
    from bot.tools import builtin_tools

    settings = settings_or_exit()
    redact = SecretRedactor(settings.secret_values())
    n = saved_notification(file, redact)

    async def routed() -> Any:
        profiles = load_profiles(settings, builtin_tools())
        if agent is not None:
            profiles = {agent: find_profile(profiles, settings.agents_dir, agent)}
        found = route_for(profiles, n)
        if found is None:
            return None, ""
        briefing = await knowledge.brief(n, profiles[found.agent], redact, fetch=False)
        return found, briefing.text

    found, known = run_async(routed)
    out.print(f"{n.source} group {_shown(n.group_key)}: {len(n.alerts)} alert(s), {n.status}", highlight=False)
    if found is None:
        out.print("No route matches: it would be accepted (200), logged and counted, and not investigated.")
        raise typer.Exit(1)
    r = found.route
    match = matchers_text(r.match)
    out.print(f"Route: agent [bold]{escape(found.agent)}[/bold], alerts[{found.index}] ({escape(match)}), "
              f"cool-down {r.cooldown_seconds} s", highlight=False)
    out.print(f"\n[bold]Root message for {escape(r.post_to)}:[/bold]", highlight=False)
    out.print(_shown(render.root_text(n)), highlight=False)
    out.print("\n[bold]Investigation prompt:[/bold]", highlight=False)
    out.print(_shown(render.prompt(n, r, known)), highlight=False)


@alerts_app.command("list")
def alerts_list(
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many groups.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="JSON: one object per alert group.")] = False,
) -> None:
    """Recent alert groups: firing or resolved (and when), where their investigation is, the session to give
    `yokebot trace`, and the thread."""
    from rich.table import Table

    from bot.alerts.store import AlertStore
    from bot.commands.support import readable_url, terminal
    from bot.redact import printable_json
    from bot.store.db import create_engine, ensure_schema

    settings = settings_or_exit()

    async def groups() -> list[Any]:
        engine = create_engine(readable_url(settings), pooled=True)
        try:
            await ensure_schema(engine, direct_url=settings.database_direct_url)
            return await AlertStore(engine, "cli").recent(limit)
        finally:
            await engine.dispose()

    found = run_async(groups)
    if as_json:
        rows = [{"id": x.group.id, "source": x.group.source, "alert": x.group.title, "agent": x.group.agent,
                 "status": x.group.state, "fired_at": x.group.fired_at.isoformat(),
                 "resolved_at": x.group.resolved_at.isoformat() if x.group.resolved_at else None,
                 "investigation": x.investigation, "session_id": x.session_id, "thread": _thread(x.group),
                 "updated_at": x.group.updated_at.isoformat()} for x in found]
        print(printable_json(json.dumps(rows, ensure_ascii=False, indent=2)))
        return
    if not found:
        out.print("No alert groups yet (set YOKEBOT_WEBHOOK_TOKEN, give an agent an alerts: route and point "
                  "Alertmanager or Grafana at /hooks/alertmanager or /hooks/grafana; docs/alerts.md).")
        return
    table = Table("id", "source", "alert", "agent", "status", "investigation", "session", "thread")
    for x in found:
        g = x.group
        status = f"resolved {g.resolved_at:%Y-%m-%d %H:%M:%S}" if g.state == "resolved" and g.resolved_at else g.state
        table.add_row(str(g.id), g.source, _shown(g.title[:60]), g.agent, status, x.investigation,
                      x.session_id or "-", _shown(_thread(g) or "-"))
    table.caption = "times in UTC; `yokebot trace SESSION` shows an investigation step by step"
    terminal().print(table)


def _thread(g: Any) -> str | None:
    return f"{g.root_platform}:{g.root_channel}:{g.thread}" if g.root_ref else None


@alerts_app.command("history")
def alerts_history(
    alertname: Annotated[str | None, typer.Argument(help="Only this alert (its alertname).")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many incidents.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="JSON: one object per incident.")] = False,
) -> None:
    """Past incidents, newest first: each alert group's thread with its labels, the investigation's conclusion,
    when it started and resolved, the thread and the session (docs/knowledge.md)."""
    from rich.table import Table

    from bot.alerts.store import AlertStore
    from bot.commands.support import readable_url
    from bot.redact import printable_json
    from bot.store.db import create_engine, ensure_schema

    settings = settings_or_exit()

    async def incidents() -> list[Any]:
        engine = create_engine(readable_url(settings))
        try:
            await ensure_schema(engine)
            return await AlertStore(engine, "cli").incidents(alertname=alertname, limit=limit)
        finally:
            await engine.dispose()

    found = run_async(incidents)
    if as_json:
        rows = [{"alertname": i.alertname, "group_labels": dict(i.group_labels), "labels": dict(i.labels),
                 "conclusion": i.conclusion, "summarized": i.summarized, "started_at": i.started_at.isoformat(),
                 "resolved_at": i.resolved_at.isoformat() if i.resolved_at else None, "thread": i.thread_link,
                 "session_id": i.session_id, "agent": i.agent, "source": i.source} for i in found]
        print(printable_json(json.dumps(rows, ensure_ascii=False, indent=2)))
        return
    if not found:
        out.print("No incidents yet" + (f" of {_shown(alertname)}" if alertname else "") + ": each alert group's "
                  "thread becomes one (docs/knowledge.md).", highlight=False)
        return
    table = Table("alert", "labels", "conclusion", "started (UTC)", "resolved (UTC)", "thread", "session")
    for i in found:
        labels = ", ".join(f"{k}={v}" for k, v in sorted(i.labels.items()) if k != "alertname")
        table.add_row(_shown(i.alertname), _shown(labels[:80]), _shown(i.conclusion or "-"),
                      i.started_at.strftime("%Y-%m-%d %H:%M"),
                      i.resolved_at.strftime("%Y-%m-%d %H:%M") if i.resolved_at else "firing",
                      _shown(i.thread_link or "-"), i.session_id or "-")
    out.print(table)
