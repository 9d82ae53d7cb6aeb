"""The terminal front end: a REPL on the same AgentService, a spinner while the agent works, tool calls
shown as they happen (bot/chat/console/view.py draws them).

Lines starting with a command (docs/commands.md) never reach the model: `/help`, `/new` (a fresh conversation),
`/reset` (forget this one), `/file PATH` (attach a file to the next message), `/quit`, and the chat commands
`/status`, `/approvals`, `/alerts`, `/usage [today|7d]` (bot/chat/core/commands.py).

Ctrl-C while a turn runs stops that turn only (recorded as `stopped` by the user) and returns to the prompt;
Ctrl-C, Ctrl-D or /quit at the prompt leaves; Ctrl-D while a turn runs leaves once its answer is in. SIGTERM
and SIGHUP (the terminal closed) end a running turn as `interrupted` and leave. On a terminal the prompt is
prompt_toolkit's (line editing, history), told to leave SIGINT to us: by default it removes the process's
SIGINT handler when each prompt ends, and Ctrl-C during the turn that follows did nothing. While a turn
runs the terminal stays in its normal mode and lines typed ahead are kept for the prompt. From a pipe,
lines are read by a daemon thread, so a Ctrl-C never waits for Enter."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import os
import signal
import sys
import threading
import uuid
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rich.console import Console
from rich.status import Status
from rich.text import Text

from bot.chat.console import view as view
from bot.chat.core.access import Origin
from bot.chat.core.attachments import LocalFile
from bot.chat.core.base import Inbound, ReplySurface
from bot.chat.core.commands import Command, Commands, CommandStyle, parse
from bot.chat.core.wiring import console_pipeline
from bot.engine.messages import USER_STOP, ToolCall, ToolResult, TurnResult
from bot.engine.model import ModelAttempt
from bot.engine.run import RunContext, TurnHooks
from bot.engine.service import AgentService
from bot.records.commands import CommandFacts
from bot.redact import printable

if TYPE_CHECKING:  # prompt_toolkit loads at the first prompt on a terminal
    from prompt_toolkit import PromptSession

PROMPT = "you> "
ORIGIN = Origin("console", "terminal", "terminal")
# the terminal's own commands, then the chat commands it shares with every platform
TERMINAL_HELP = """Commands (they never reach the model):
  /help              this list
  /new               start a fresh conversation (the last one stays in `yokebot sessions`)
  /reset             forget this conversation (long-term memories stay)
  /file PATH         attach a file to your next message
  /status            the agent, its model, approvals waiting
  /approvals         approval requests waiting (in the terminal you answer them when they are asked)
  /alerts            alert groups firing now
  /usage [today|7d]  tokens and cost of the terminal's conversations
  /quit              leave (also Ctrl-D, or Ctrl-C at the prompt)
Anything else is a question for the agent."""
SHARED = frozenset({"status", "approvals", "alerts", "usage"})
TERMINAL_ONLY = "terminal only"  # the ref of an alert shown in this terminal: nobody was notified


class TerminalAlerts:
    """Where `notify` goes in a terminal command (`chat`, `ask`, `schedule run`) when the target's platform is
    not configured (its token is not set; a configured one gets a post-only adapter and is posted to): the
    alert is shown in this terminal, nobody is notified, the model is told so (the notifier's `unreachable`),
    and the call is audited `not_posted`. The target `console:terminal` always comes here. Such an alert never
    enters the shared notify ledger, so it can neither suppress nor use up a real alert on the same database."""

    def __init__(self, console: Console, hints: Mapping[str, str] | None = None) -> None:
        """`console`: where alerts are shown (`ask`: stderr, its stdout is the answer). `hints`: per platform,
        what configures it (the registry's)."""
        self.console = console
        self.hints = dict(hints or {})

    def why_not(self, platform: str) -> str:
        if platform == "console":
            return "console:terminal is this terminal"
        hint = self.hints.get(platform)
        return f"{platform} is not configured" + (f"; to post there, {hint.split(' and run ')[0]}" if hint else "")

    async def show(self, target: str, text: str) -> str:
        platform = target.partition(":")[0]
        note = ("shown in this terminal" if platform == "console" else
                f"{platform} is not configured, so it is shown here only; nobody was notified")
        view.print_text(self.console, view.alert(target, text, note))
        return TERMINAL_ONLY


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
        view.print_text(self.console, view.tool_start(call.name, call.arguments, _depth(run)))

    async def tool_finished(self, run: RunContext, result: ToolResult) -> None:
        view.print_text(self.console, view.tool_end(result.status, result.content, _depth(run)))
        self.status.update("thinking…")


def _depth(run: RunContext) -> int:
    """0 for the turn's own calls; a sub-agent's are shown under the `delegate` call that ran it."""
    return run.delegation.depth if run.delegation is not None else 0


class ConsoleReply(ReplySurface):
    """The reply surface of the terminal (the pipeline drives it): a spinner while working, tool calls as they
    run, the answer line for line (as it is written, when the model streams)."""

    stopped_text = ""  # Ctrl-C: the adapter itself says the turn was stopped

    def __init__(self, console: Console, thread: str, *, spinner: bool = True) -> None:
        """`spinner`: "thinking…" while it works (not for a command answered without the model)."""
        self.console, self.thread, self.spinner = console, thread, spinner
        self.status = Status("thinking…", console=console)
        self.view = LiveView(console, self.status)
        self.hooks = self.view  # the pipeline passes it to AgentService.handle

    async def working(self) -> str:
        if self.spinner:
            self.status.start()
        return self.thread

    async def deliver(self, text: str) -> None:
        self.status.stop()
        streamed, self.view.streamed = self.view.streamed, ""
        if streamed:
            if text.startswith(streamed):  # on screen already as it was written (the guardrails may hold a tail)
                rest = text[len(streamed):]
                self.console.print(Text(printable(rest)), highlight=False, emoji=False, soft_wrap=True)
                return
            self.console.print()  # end the streamed line
            if streamed.strip() == text.strip():
                return
        view.print_text(self.console, view.answer(text))

    async def done(self, ok: bool) -> None:
        self.status.stop()


class LineReader:
    """Lines typed by the user; None at end of input. `interrupt()` makes a pending read return None.

    On a terminal, `watch()` reads what is typed while a turn runs (the terminal in its normal line mode):
    whole lines wait for the next prompt, Ctrl-D on an empty line (end of input) leaves after the turn."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.tty = sys.stdin.isatty() and sys.stdout.isatty()
        self.eof = False  # Ctrl-D while a turn ran (terminal) or the end of piped input
        self._closed = False
        self._queue: asyncio.Queue[str | None] | None = None
        self._session: PromptSession[str] | None = None
        self._ahead: deque[str] = deque()  # lines typed while a turn ran
        self._partial = ""  # typed while a turn ran, without Enter yet: the next prompt starts with it
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._watching = False

    async def read(self, prompt: str = PROMPT, typed_ahead: bool = True) -> str | None:
        """The next line. `typed_ahead=False` (an approval's question) ignores lines typed before it was asked."""
        if self._closed:
            return None
        if self.tty:
            if typed_ahead and self._ahead:
                line = self._ahead.popleft()
                self.console.print(Text.assemble((prompt, "bold cyan"), printable(line)), highlight=False)
                return line
            if self.eof:
                return None
            return await self._prompt(prompt, typed_ahead)
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._start_thread(asyncio.get_running_loop(), self._queue)
        self.console.print(prompt, end="", style="bold cyan", highlight=False)
        line = await self._queue.get()
        if line is None:  # the end of piped input, whichever question read it: every later read is None too
            self.eof = self._closed = True
        return line

    async def _prompt(self, prompt: str, typed_ahead: bool) -> str | None:
        from prompt_toolkit import PromptSession

        if self._session is None:
            self._session = PromptSession[str]()
        session = self._session
        default, self._partial = (self._partial, "") if typed_ahead else ("", self._partial)
        try:
            # handle_sigint=False: the adapter's SIGINT handler stays installed for the turn after this prompt
            return await session.prompt_async(prompt, default=default, handle_sigint=False)
        except (EOFError, KeyboardInterrupt):
            return None

    def interrupt(self) -> None:
        """Leave: a pending or later read returns None."""
        self._closed = True
        if self._queue is not None:
            self._queue.put_nowait(None)
        if self._session is not None and self._session.app.is_running:
            self._session.app.exit(exception=EOFError())

    def watch(self) -> None:
        """While a turn runs: read what the user types (a terminal only)."""
        if not self.tty or self._watching or self.eof:
            return
        with contextlib.suppress(OSError, ValueError, NotImplementedError):
            asyncio.get_running_loop().add_reader(sys.stdin.fileno(), self._readable)
            self._watching = True

    def unwatch(self) -> None:
        if self._watching:
            self._watching = False
            with contextlib.suppress(OSError, ValueError, NotImplementedError):
                asyncio.get_running_loop().remove_reader(sys.stdin.fileno())

    def _readable(self) -> None:
        try:
            data = os.read(sys.stdin.fileno(), 4096)
        except OSError:  # the terminal is gone (SIGHUP follows)
            data = b""
        if not data:  # Ctrl-D on an empty line: the end of input
            self.eof = True
            self.unwatch()
            self.console.print("[dim](Ctrl-D: leaving when this turn ends; Ctrl-C stops it now)[/dim]",
                               highlight=False)
            return
        *lines, self._partial = (self._partial + self._decoder.decode(data)).split("\n")
        self._ahead.extend(lines)

    @staticmethod
    def _start_thread(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
        def pump() -> None:
            for line in sys.stdin:
                loop.call_soon_threadsafe(queue.put_nowait, line)
            loop.call_soon_threadsafe(queue.put_nowait, None)

        threading.Thread(target=pump, name="yokebot-stdin", daemon=True).start()


class ConsoleAdapter:
    platform = "console"

    def __init__(self, service: AgentService, agent: str, console: Console | None = None, thread: str | None = None,
                 notes: tuple[str, ...] = (), facts: CommandFacts | None = None, info: tuple[str, ...] = ()):
        self.service = service
        self.agent = agent
        self.console = console or Console()
        self.thread = thread or agent
        self.info = info  # one dim line each under the greeting (where the agent came from, the session it continues)
        self.notes = notes  # one yellow line each after them: what the user should know (shell refused here, …)
        self.pipeline = console_pipeline(service, agent)
        self.commands = Commands(self.pipeline, facts, CommandStyle(prefix=""), service.loop.default_model,
                                 every_channel=True)  # whoever runs yokebot sees every channel's alerts
        self.stop_signal: int | None = None  # SIGTERM or SIGHUP ended the chat
        self._turn: asyncio.Task[TurnResult | None] | None = None
        self._reader: LineReader | None = None
        self._reply: ConsoleReply | None = None
        self._files: list[LocalFile] = []  # `/file PATH`: attached to the next message

    def inbound(self, text: str) -> Inbound:
        self._reply = ConsoleReply(self.console, self.thread)
        files, self._files = tuple(self._files), []
        return Inbound(ORIGIN, self.thread, text, "console", self._reply, files=files)

    async def ask_user(self, question: str) -> str | None:
        """A line typed in answer to `question` mid-turn (an approval), with the spinner paused. Lines typed
        before the question was asked do not answer it."""
        if self._reader is None:
            return None
        reply = self._reply
        if reply is not None:
            reply.status.stop()
        self._reader.unwatch()
        try:
            return await self._reader.read(question, typed_ahead=False)
        finally:
            if self._turn is not None:
                self._reader.watch()
            if reply is not None:
                reply.status.start()

    async def turn(self, text: str) -> TurnResult | None:
        """One turn through the pipeline; the answer (or one sentence on failure) is printed on the way."""
        return await self.pipeline.answer(self.inbound(text))

    def _on_interrupt(self) -> None:
        """Ctrl-C: stop the running turn (its user's choice), or leave at the prompt."""
        if self._turn is not None and not self._turn.done():
            self._turn.cancel(USER_STOP)
        elif self._reader is not None:
            self._reader.interrupt()

    def _on_stop(self, signum: int) -> None:
        """SIGTERM or SIGHUP: end the running turn as interrupted (as a shutdown does) and leave."""
        self.stop_signal = signum
        if self._turn is not None and not self._turn.done():
            self._turn.cancel()
        if self._reader is not None:
            self._reader.interrupt()

    async def _settle(self) -> None:
        """Let the service record a stopped turn (it does so in a background task) before going on."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await self.service.settled()

    async def _one(self, text: str) -> None:
        self._turn = asyncio.ensure_future(self.turn(text))
        if self._reader is not None:
            self._reader.watch()
        try:
            result = await self._turn
        except asyncio.CancelledError:
            if asyncio.current_task() is not None and asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise  # the chat itself is being stopped
            if self._reply is not None:
                self._reply.status.stop()
            await self._settle()
            if self.stop_signal is None:
                self.console.print("[yellow](stopped; the turn is recorded as stopped by you)[/yellow]")
            return
        finally:
            self._turn = None
            if self._reader is not None:
                self._reader.unwatch()
        if result is not None and result.hit_iteration_limit:
            self.console.print("[yellow](iteration limit reached)[/yellow]")

    async def repl(self) -> None:
        self.console.print(f"[bold]yokebot[/bold] — talking to agent [cyan]{self.agent}[/cyan]. "
                           "Ctrl-C stops a turn; Ctrl-C at the prompt, Ctrl-D or /quit leaves.")
        for line in self.info:
            self.console.print(Text(printable(line), style="dim"), highlight=False)
        for note in self.notes:
            self.console.print(Text(printable(note), style="yellow"), highlight=False)
        self._reader = LineReader(self.console)
        loop = asyncio.get_running_loop()
        handlers = {signal.SIGINT: self._on_interrupt}
        for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if signum is not None:
                handlers[signum] = functools.partial(self._on_stop, signum)
        installed: list[int] = []
        for signum, handler in handlers.items():
            with contextlib.suppress(NotImplementedError, RuntimeError):  # no signal handlers on Windows loops
                loop.add_signal_handler(signum, handler)
                installed.append(signum)
        try:
            await self._loop(self._reader)
        finally:
            for signum in installed:
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(signum)
            await self._settle()

    async def _loop(self, reader: LineReader) -> None:
        while self.stop_signal is None:
            line = await reader.read()
            if line is None:
                if self.stop_signal is None:
                    self.console.print()
                return
            text = line.strip()
            if text in ("/quit", "/exit"):
                return
            if text and not await self._command(text):
                await self._one(text)

    async def _command(self, text: str) -> bool:
        """A line that is a command, run here (True); False: a question for the agent (`/reset` is one the
        service answers without the model). A line whose first word is a path (`/var/log/… why?`) is a question."""
        word, _, rest = text.partition(" ")
        if not word.startswith("/") or "/" in word[1:]:
            return False
        name = word[1:].lower()
        if name == "file" and rest.strip():  # attach a file to the next message (docs/attachments.md)
            self._files.append(LocalFile(rest.strip()))
            self.console.print(f"(attached {self._files[-1].name!r} to your next message)", markup=False)
        elif name == "help":
            self.console.print(TERMINAL_HELP, markup=False, highlight=False)
        elif name == "new":
            self.thread = f"{self.agent}:{uuid.uuid4().hex[:8]}"
            dropped, self._files = self._files, []  # a fresh conversation starts with nothing attached
            self.console.print("(a fresh conversation; the last one stays in `yokebot sessions`"
                               + (f"; {', '.join(repr(f.name) for f in dropped)} no longer attached: /file it "
                                  "again to send it" if dropped else "") + ")", markup=False, highlight=False)
        elif name == "reset" and not rest.strip():
            return False
        elif name == "ask" and rest.strip():
            await self._one(rest.strip())
        elif name in SHARED:
            command = parse(text[1:])
            if isinstance(command, str):
                self.console.print(command.replace("/yokebot ", "/"), markup=False, highlight=False)
            else:
                await self._shared(command)
        else:
            self.console.print(f"(/{name} is not a command here; /help lists them)", markup=False,
                               highlight=False)
        return True

    async def _shared(self, command: Command) -> None:
        """A chat command shared with every platform: a turn recorded like any, answered without the model."""
        self._reply = ConsoleReply(self.console, self.thread, spinner=command.name == "ask")
        await self.pipeline.answer(self.commands.inbound(command, ORIGIN, self._reply, claim_key=None))
