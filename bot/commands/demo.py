"""`yokebot demo`: `yokebot chat` on the demo agent, which reads a bundled sample nginx log (bot/demo/), so the
README's story works on a machine without nginx. Its files are made afresh in the state folder on each start."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from bot.commands.support import err, settings_or_exit
from bot.engine.errors import YokebotError

demo_app = typer.Typer()  # top-level: `yokebot demo`


def demo_home() -> Path:
    """Where the demo's logs and agent live: `$XDG_STATE_HOME/yokebot/demo` (~/.local/state/yokebot/demo)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "yokebot" / "demo"


@demo_app.command()
def demo(
    new: Annotated[bool, typer.Option("--new", help="Start a fresh conversation instead of continuing.")] = False,
) -> None:
    """Chat with a demo agent that reads a bundled sample nginx log (502s from a dead upstream): try "check the
    recent nginx error logs; if something's wrong, push it to the team channel", then `yokebot trace`."""
    from bot.commands.terminal import run_chat
    from bot.demo.files import AGENT, prepare

    settings = settings_or_exit()
    try:  # said before the demo's files are made and its banner printed
        settings.require_model_endpoint()
    except YokebotError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    home = demo_home()
    agents = prepare(home)
    err.print(f"[dim]demo: the agent '{AGENT}' reads the sample nginx logs in {home / 'logs' / 'nginx'}; try "
              "[bold]check the recent nginx error logs; if something's wrong, push it to the team channel[/bold]"
              "[/dim]", highlight=False, soft_wrap=True)
    run_chat(settings.model_copy(update={"agents_dir": agents}), AGENT, new)
