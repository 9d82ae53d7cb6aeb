"""Approvals in the terminal: `yokebot chat` asks its user inline (y/N); `yokebot ask` approves gated calls
only when given `--approve` (recorded as approved by the terminal user), and otherwise refuses them."""

from __future__ import annotations

import getpass
from collections.abc import Awaitable, Callable
from typing import Literal

from rich.console import Console
from rich.markup import escape

from bot.approvals import desk as desk_api
from bot.approvals.records import Approval
from bot.redact import printable

Verdict = tuple[Literal["approved", "denied"], str]


def terminal_user() -> str:
    """Who sits at this terminal, as the audit records it."""
    try:
        return f"terminal:{getpass.getuser()}"
    except (KeyError, OSError):
        return "terminal"


class ConsoleApprover:
    """`yokebot chat`: shows the exact call and reads y/N (anything else, or end of input, is no)."""

    def __init__(self, console: Console, ask: Callable[[str], Awaitable[str | None]]) -> None:
        self.console, self.ask = console, ask

    async def decide(self, approval: Approval) -> Verdict | str:
        self.console.print(f"[bold yellow]Approval needed:[/bold yellow] the agent wants to run "
                           f"[cyan]{escape(printable(approval.tool, one_line=True))}[/cyan]"
                           f"{escape(printable(desk_api.on_behalf(approval), one_line=True))} "
                           f"{escape(printable(approval.arguments, one_line=True))}", highlight=False)
        answer = await self.ask("approve? (y/N) ")
        who = terminal_user()
        if answer is not None and answer.strip().lower() in ("y", "yes"):
            return "approved", who
        return "denied", who


class CliApprover:
    """`yokebot ask`: nobody is asked. With --approve, the terminal user approves every gated call; without,
    each is refused and named in `refused` (the command says so after the answer)."""

    def __init__(self, approve: bool) -> None:
        self.approve = approve
        self.refused: list[str] = []

    async def decide(self, approval: Approval) -> Verdict | str:
        if self.approve:
            return "approved", terminal_user()
        self.refused.append(approval.tool)
        return (f"{approval.tool} needs a human's approval, and `yokebot ask` asks nobody; the user can run the "
                "command again with --approve to approve it")
