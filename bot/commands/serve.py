"""`yokebot run`: every configured platform, the scheduler and the HTTP server, until SIGTERM (bot/runner.py)."""

from __future__ import annotations

import logging

import typer

from bot.commands.support import err, run_async, settings_or_exit, setup_logging

serve_app = typer.Typer()  # its command is top-level: `yokebot run`


@serve_app.command()
def run() -> None:
    """Start every configured adapter, the scheduler and the HTTP server; stop cleanly on SIGTERM.

    Messages acknowledged but cut short by a crash are answered after the restart (or by another instance).
    On SQLite, one `yokebot run` per database file; to run several, use PostgreSQL (docs/scale-out.md)."""
    import errno

    from bot.chat.platforms import configured
    from bot.observability.http import NO_PLATFORM
    from bot.runner import serve
    from bot.tools.isolation import not_dumpable

    settings = settings_or_exit()
    not_dumpable()
    setup_logging(settings)
    if not configured(settings):
        logging.getLogger("bot.cli").warning("%s.", NO_PLATFORM[0].upper() + NO_PLATFORM[1:])
    try:
        run_async(lambda: serve(settings))
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        err.print(f"[red]error:[/red] port {settings.http_port} is already in use; stop the other process or set "
                  "YOKEBOT_HTTP_PORT to a free port.", highlight=False)
        raise typer.Exit(1) from None
