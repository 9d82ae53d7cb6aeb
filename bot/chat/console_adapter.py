"""The terminal front end: a REPL on the same AgentService, a spinner while the agent works, tool calls
shown as they happen."""

from __future__ import annotations

import asyncio
import json

from rich.console import Console
from rich.markdown import Markdown
from rich.status import Status

from bot.chat.base import InboundMessage
from bot.engine.context import RunContext
from bot.engine.errors import YokebotError
from bot.engine.hooks import TurnHooks
from bot.engine.messages import ToolCall, ToolResult, TurnResult
from bot.engine.service import AgentService

STATUS_STYLE = {"ok": "green", "error": "red", "denied": "yellow"}


def short(value: object, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class LiveView(TurnHooks):
    """The console's live view of a turn: each tool call as it starts and ends, under a spinner."""

    def __init__(self, console: Console, status: Status) -> None:
        self.console, self.status = console, status

    async def tool_started(self, run: RunContext, call: ToolCall) -> None:
        self.status.update(f"running {call.name}…")
        self.console.print(f"[dim]→ {call.name}({short(call.arguments)})[/dim]")

    async def tool_finished(self, run: RunContext, result: ToolResult) -> None:
        style = STATUS_STYLE.get(result.status, "white")
        self.console.print(f"[{style}]  ← {result.status}[/{style}] [dim]{short(result.content)}[/dim]")
        self.status.update("thinking…")


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
        with status:
            return await self.service.handle(self.inbound(text).to_request(self.agent),
                                             LiveView(self.console, status))

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
