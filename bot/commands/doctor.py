"""`yokebot doctor`: check what yokebot needs and say what to fix (the checks: bot/doctor.py)."""

from __future__ import annotations

import typer
from rich.markup import escape

from bot.commands.support import err, out, run_async, settings_or_exit, setup_logging

doctor_app = typer.Typer()  # its command is top-level: `yokebot doctor`


@doctor_app.command()
def doctor() -> None:
    """Check the model endpoint, the database, the Slack/Discord tokens and the agents; say what to fix.

    The model check also asks the endpoint whether it serves the model. Also checked: the shell sandbox
    (bubblewrap) and that every program the agents' shell allow-lists name is installed, each Prometheus the
    agents query, each MCP server they declare (started once; a server that dies shows its last stderr
    lines), and the alert webhooks (YOKEBOT_WEBHOOK_TOKEN and the agents' alerts: routes). Nothing is
    written.

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
