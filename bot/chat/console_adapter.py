"""The terminal front end: a REPL on the same inbound pipeline as Slack and Discord (no claims, no access lists,
the agent picked with --agent), a spinner while the agent works, tool calls shown as they happen."""

from __future__ import annotations

import asyncio
import json

from rich.console import Console
from rich.markdown import Markdown
from rich.status import Status

from bot.chat.access import Origin
from bot.chat.base import Inbound
from bot.chat.wiring import console_pipeline
from bot.engine.loop import LoopEvent
from bot.engine.messages import TurnResult
from bot.engine.service import AgentService

STATUS_STYLE = {"ok": "green", "error": "red", "denied": "yellow"}


def short(value: object, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ConsoleReply:
    """The reply surface of the terminal: a spinner while working, tool calls as they run, the answer as
    rendered Markdown."""

    def __init__(self, console: Console, thread: str) -> None:
        self.console, self.thread = console, thread
        self.status = Status("thinking…", console=console)

    async def working(self) -> str:
        self.status.start()
        return self.thread

    async def observe(self, event: LoopEvent) -> None:
        """The progress hook the pipeline passes to AgentService.handle."""
        if event.kind == "tool_start" and event.call is not None:
            self.status.update(f"running {event.call.name}…")
            self.console.print(f"[dim]→ {event.call.name}({short(event.call.arguments)})[/dim]")
        elif event.kind == "tool_end" and event.result is not None:
            style = STATUS_STYLE.get(event.result.status, "white")
            preview = short(event.result.content)
            self.console.print(f"[{style}]  ← {event.result.status}[/{style}] [dim]{preview}[/dim]")
            self.status.update("thinking…")

    async def deliver(self, text: str) -> None:
        self.status.stop()
        self.console.print(Markdown(text))

    async def done(self, ok: bool) -> None:
        self.status.stop()


class ConsoleAdapter:
    platform = "console"

    def __init__(self, service: AgentService, agent: str, console: Console | None = None, thread: str | None = None):
        self.agent = agent
        self.console = console or Console()
        self.thread = thread or agent
        self.pipeline = console_pipeline(service, agent)

    def inbound(self, text: str) -> Inbound:
        return Inbound(Origin("console", "terminal", "terminal"), self.thread, text, "console",
                       ConsoleReply(self.console, self.thread))

    async def turn(self, text: str) -> TurnResult | None:
        """One turn through the pipeline; the answer (or one sentence on failure) is printed on the way."""
        return await self.pipeline.answer(self.inbound(text))

    async def repl(self) -> None:
        self.console.print(f"[bold]yokebot[/bold] — talking to agent [cyan]{self.agent}[/cyan]. "
                           "Ctrl-D or /quit to leave.")
        while True:
            try:
                text = await asyncio.to_thread(self.console.input, "[bold cyan]you>[/bold cyan] ")
            except (EOFError, KeyboardInterrupt):
                self.console.print()
                return
            text = text.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                return
            result = await self.turn(text)
            if result is not None and result.hit_iteration_limit:
                self.console.print("[yellow](iteration limit reached)[/yellow]")
