"""The terminal front end: a REPL on the same AgentService, a spinner while the agent works, tool calls
shown as they happen (bot/chat/console/view.py draws them).

Ctrl-C while a turn runs stops that turn only (its row says it was stopped) and returns to the prompt;
Ctrl-C (or Ctrl-D, or /quit) at the prompt leaves. On a terminal the prompt is prompt_toolkit's (line
editing, history); from a pipe, lines are read by a daemon thread, so a Ctrl-C never waits for Enter."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Callable

from rich.console import Console
from rich.status import Status
from rich.text import Text

from bot.chat.console import view as view
from bot.chat.core.access import Origin
from bot.chat.core.attachments import LocalFile
from bot.chat.core.base import Inbound, ReplySurface
from bot.chat.core.wiring import console_pipeline
from bot.engine.context import RunContext
from bot.engine.hooks import ModelAttempt, TurnHooks
from bot.engine.messages import ToolCall, ToolResult, TurnResult
from bot.engine.service import AgentService
from bot.redact import printable

PROMPT = "you> "


class TerminalAlerts:
    """`notify` in `yokebot chat`: the alert is shown in this terminal. Registered as platform `console`
    (target `console:terminal`), and used for targets whose platform is not configured in this process
    (the `ops` agent's `slack:#ops-alerts` when Slack is not set up), so the demo has somewhere to go."""

    platform = "console"

    def __init__(self, console: Console) -> None:
        self.console = console

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def post(self, channel: str, text: str) -> str:
        view.print_text(self.console, view.alert(f"console:{channel}", text, "shown in this terminal"))
        return "terminal"

    async def post_instead(self, target: str, text: str) -> str:
        platform = target.partition(":")[0]
        note = f"{platform} is not configured in `yokebot chat`, so it is shown here only"
        view.print_text(self.console, view.alert(target, text, note))
        return f"shown in the terminal only; {platform} is not configured in this process"


class LiveView(TurnHooks):
    """The console's live view of a turn: each tool call as it starts and ends, under the spinner, and the
    answer as the model writes it (with `YOKEBOT_MODEL_STREAM=true`)."""

    def __init__(self, console: Console, status: Status) -> None:
        self.console, self.status = console, status
        self.streamed = ""  # the text on screen from the model call in progress

    async def text_delta(self, run: RunContext, text: str) -> None:
        if not self.streamed:
            self.status.stop()
        self.streamed += text
        self.console.print(Text(printable(text)), end="", highlight=False, emoji=False, soft_wrap=True)

    async def model_attempt(self, run: RunContext, attempt: ModelAttempt) -> None:
        calls_tools = attempt.response is not None and bool(attempt.response.message.tool_calls)
        if self.streamed and (attempt.error is not None or calls_tools):
            self.console.print()  # that text was not the answer (a retry follows, or tool calls)
            self.streamed = ""
            self.status.start()

    async def tool_started(self, run: RunContext, call: ToolCall) -> None:
        self.status.update(f"running {call.name}…")
        view.print_text(self.console, view.tool_start(call.name, call.arguments))

    async def tool_finished(self, run: RunContext, result: ToolResult) -> None:
        view.print_text(self.console, view.tool_end(result.status, result.content))
        self.status.update("thinking…")


class ConsoleReply(ReplySurface):
    """The reply surface of the terminal (the pipeline drives it): a spinner while working, tool calls as they
    run, the answer line for line (as it is written, when the model streams)."""

    stopped_text = ""  # Ctrl-C: the adapter itself says the turn was stopped
    hooks: LiveView

    def __init__(self, console: Console, thread: str) -> None:
        self.console, self.thread = console, thread
        self.status = Status("thinking…", console=console)
        self.hooks = LiveView(console, self.status)  # the pipeline passes it to AgentService.handle

    async def working(self) -> str:
        self.status.start()
        return self.thread

    async def deliver(self, text: str) -> None:
        self.status.stop()
        streamed, self.hooks.streamed = self.hooks.streamed, ""
        if streamed:
            self.console.print()  # end the streamed line
            if streamed.strip() == text.strip():
                return  # it is on screen already, as it was written
        view.print_text(self.console, view.answer(text))

    async def done(self, ok: bool) -> None:
        self.status.stop()


class LineReader:
    """Lines typed by the user; None at end of input. `interrupt()` makes a pending read return None."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.tty = sys.stdin.isatty() and sys.stdout.isatty()
        self._queue: asyncio.Queue[str | None] | None = None
        self._session: object | None = None
        self.ended = False  # end of input was read (by any question): every later read is None at once

    async def read(self, prompt: str = PROMPT) -> str | None:
        if self.ended and (self._queue is None or self._queue.empty()):
            return None
        if self.tty:
            return await self._prompt(prompt)
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._start_thread(asyncio.get_running_loop(), self._queue, self._end)
        self.console.print(prompt, end="", style="bold cyan", highlight=False)
        return await self._queue.get()

    async def _prompt(self, prompt: str) -> str | None:
        from prompt_toolkit import PromptSession

        if self._session is None:
            self._session = PromptSession[str]()
        session: PromptSession[str] = self._session  # type: ignore[assignment]
        try:
            return await session.prompt_async(prompt)
        except EOFError:
            self.ended = True
            return None
        except KeyboardInterrupt:
            return None

    def interrupt(self) -> None:
        if self._queue is not None:
            self._queue.put_nowait(None)

    def _end(self) -> None:
        self.ended = True

    @staticmethod
    def _start_thread(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None],
                      end: Callable[[], None]) -> None:
        def pump() -> None:
            for line in sys.stdin:
                loop.call_soon_threadsafe(queue.put_nowait, line)
            loop.call_soon_threadsafe(end)
            loop.call_soon_threadsafe(queue.put_nowait, None)

        threading.Thread(target=pump, name="yokebot-stdin", daemon=True).start()


class ConsoleAdapter:
    platform = "console"

    def __init__(self, service: AgentService, agent: str, console: Console | None = None, thread: str | None = None):
        self.service = service
        self.agent = agent
        self.console = console or Console()
        self.thread = thread or agent
        self.pipeline = console_pipeline(service, agent)
        self._turn: asyncio.Task[TurnResult | None] | None = None
        self._reader: LineReader | None = None
        self._reply: ConsoleReply | None = None
        self._files: list[LocalFile] = []  # `/file PATH`: attached to the next message

    def inbound(self, text: str) -> Inbound:
        self._reply = ConsoleReply(self.console, self.thread)
        files, self._files = tuple(self._files), []
        return Inbound(Origin("console", "terminal", "terminal"), self.thread, text, "console", self._reply,
                       files=files)

    async def ask_user(self, question: str) -> str | None:
        """A line typed in answer to `question` mid-turn (an approval), with the spinner paused."""
        if self._reader is None:
            return None
        reply = self._reply
        if reply is not None:
            reply.status.stop()
        try:
            return await self._reader.read(question)
        finally:
            if reply is not None:
                reply.status.start()

    async def turn(self, text: str) -> TurnResult | None:
        """One turn through the pipeline; the answer (or one sentence on failure) is printed on the way."""
        return await self.pipeline.answer(self.inbound(text))

    def _on_interrupt(self) -> None:
        if self._turn is not None and not self._turn.done():
            self._turn.cancel()
        elif self._reader is not None:
            self._reader.interrupt()

    async def _settle(self) -> None:
        """Let the service record a stopped turn (it does so in a background task) before going on."""
        pending = list(getattr(self.service, "_background", ()))
        if pending:
            await asyncio.wait(pending, timeout=5)

    async def _one(self, text: str) -> None:
        self._turn = asyncio.ensure_future(self.turn(text))
        try:
            result = await self._turn
        except asyncio.CancelledError:
            if asyncio.current_task() is not None and asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise  # the chat itself is being stopped
            await self._settle()
            self.console.print("[yellow](stopped; the turn is recorded as stopped)[/yellow]")
            return
        finally:
            self._turn = None
        if result is not None and result.hit_iteration_limit:
            self.console.print("[yellow](iteration limit reached)[/yellow]")

    async def repl(self) -> None:
        self.console.print(f"[bold]yokebot[/bold] — talking to agent [cyan]{self.agent}[/cyan]. "
                           "Ctrl-C stops a turn; Ctrl-C at the prompt, Ctrl-D or /quit leaves.")
        self._reader = LineReader(self.console)
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):  # no signal handlers on Windows loops
            loop.add_signal_handler(signal.SIGINT, self._on_interrupt)
        try:
            await self._loop(self._reader)
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
            await self._settle()

    async def _loop(self, reader: LineReader) -> None:
        while True:
            line = await reader.read()
            if line is None:
                self.console.print()
                return
            text = line.strip()
            if text in ("/quit", "/exit"):
                return
            if text.startswith("/file "):  # attach a file to the next message (docs/attachments.md)
                self._files.append(LocalFile(text[6:].strip()))
                self.console.print(f"(attached {self._files[-1].name!r} to your next message)", markup=False)
                continue
            if text:
                await self._one(text)
