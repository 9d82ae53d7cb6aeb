"""The terminal front end: a REPL on the same AgentService, a spinner while the agent works, tool calls
shown as they happen."""

from __future__ import annotations

import asyncio
import json

from rich.console import Console
from rich.markdown import Markdown
from rich.status import Status

from bot.chat.base import InboundMessage
from bot.engine.errors import YokebotError
from bot.engine.loop import LoopEvent
from bot.engine.messages import TurnResult
from bot.engine.service import AgentService

STATUS_STYLE = {"ok": "green", "error": "red", "denied": "yellow"}


def short(value: object, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ConsoleAdapter:
    platform = "console"

    def __init__(self, service: AgentService, agent: str, console: Console | None = None, thread: str | None = None):
        self.service = service
        self.agent = agent
        self.console = console or Console()
        self.thread = thread or agent

    def inbound(self, text: str) -> InboundMessage:
        return InboundMessage(platform="console", channel="terminal", thread=self.thread, text=text,
                              user="terminal", trigger="console")

    async def turn(self, text: str) -> TurnResult:
        status = Status("thinking…", console=self.console)

        async def observe(event: LoopEvent) -> None:
            if event.kind == "tool_start" and event.call is not None:
                status.update(f"running {event.call.name}…")
                self.console.print(f"[dim]→ {event.call.name}({short(event.call.arguments)})[/dim]")
            elif event.kind == "tool_end" and event.result is not None:
                style = STATUS_STYLE.get(event.result.status, "white")
                preview = short(event.result.content)
                self.console.print(f"[{style}]  ← {event.result.status}[/{style}] [dim]{preview}[/dim]")
                status.update("thinking…")

        with status:
            return await self.service.handle(self.inbound(text).to_request(self.agent), observe)

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
            try:
                result = await self.turn(text)
            except YokebotError as exc:  # e.g. the database refused the turn's records: say so, keep chatting
                self.console.print(f"[red]error:[/red] {exc}", highlight=False)
                continue
            self.console.print(Markdown(result.answer or "(no answer)"))
            if result.hit_iteration_limit:
                self.console.print("[yellow](iteration limit reached)[/yellow]")
