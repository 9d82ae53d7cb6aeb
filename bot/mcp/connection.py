"""One MCP server, kept connected: a supervisor task opens the session (stdio or streamable HTTP), lists
the tools, checks the server now and then, and reconnects with exponential backoff when it crashes, hangs
or cannot be reached. Tool calls go through `call()`; a dead server makes them fail fast with one sentence.

The SDK's client lives in anyio task groups, which must be entered and left by the same task: only the
supervisor task enters and leaves the `Client`; callers just send requests on it."""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import shutil
import threading
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, TextIO, cast

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, CallToolResult, Implementation
from mcp_types import Tool as McpTool

from bot.engine.errors import ConfigError
from bot.mcp.params import ServerParams
from bot.observability.traceparent import outgoing
from bot.redact import SecretRedactor, printable
from bot.tools.isolation import SAFE_PATH, bwrap_path, probe, server_sandbox

log = logging.getLogger(__name__)

State = Literal["starting", "up", "down", "stopped"]
STOP_SECONDS = 10.0
STDERR_TAIL_LINES = 5  # a server that dies at start is shown with its last words
STDERR_TAIL_CHARS = 300


@dataclass(frozen=True, slots=True)
class McpTiming:
    startup: float = 20.0  # connect + list tools, per attempt
    backoff_base: float = 1.0
    backoff_max: float = 60.0
    health: float = 30.0  # a connected server is checked this often (tools/list)
    health_timeout: float = 5.0


class ServerUnavailable(Exception):
    """The server is not connected (down, restarting, or stopped): one sentence for the model."""


class ServerLost(Exception):
    """The connection broke during the call (the server crashed or went away)."""


def describe(exc: BaseException) -> str:
    """One line for the model and /readyz: the innermost cause of an exception group, type and message."""
    inner = _first_cause(exc)
    text = str(inner).strip().splitlines()[0] if str(inner).strip() else ""
    return f"{type(inner).__name__}: {text}" if text else type(inner).__name__


def _first_cause(exc: BaseException) -> BaseException:
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    group = cast("BaseExceptionGroup[BaseException]", exc)  # isinstance cannot name the member type
    return _first_cause(group.exceptions[0]) if group.exceptions else group


class _StderrToLog:
    """A pipe for a stdio server's stderr; a thread turns its lines into log records (no terminal noise),
    redacted, and keeps the last few for the error of a server that died."""

    def __init__(self, server: str, redact: Callable[[str], str]) -> None:
        read_fd, write_fd = os.pipe()
        self.file: TextIO = os.fdopen(write_fd, "w")  # closed by close()
        self._redact = redact
        self._tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._logger = logging.getLogger(f"bot.mcp.server.{server}")
        self._thread = threading.Thread(target=self._pump, args=(read_fd,), daemon=True, name=f"mcp-{server}")
        self._thread.start()

    def _pump(self, read_fd: int) -> None:
        with os.fdopen(read_fd, "r", errors="replace") as lines:
            for line in lines:
                text = printable(self._redact(line.rstrip()[:2000]), one_line=True)
                if text.strip():
                    self._tail.append(text[:STDERR_TAIL_CHARS])
                self._logger.info("%s", text)

    def close(self) -> None:
        self.file.close()  # the thread ends when the server's copy is closed too

    def tail(self, wait: float) -> str:
        """The last lines of stderr, once the server's end is closed too (or after `wait` seconds)."""
        self._thread.join(wait)
        return " | ".join(self._tail)


def launch(params: ServerParams) -> tuple[str, list[str], dict[str, str]]:
    """(command, args, environment) that start a stdio server: inside bubblewrap when it works here (its
    own PID namespace and /proc, the files its entry grants), else as it is if `isolation: preferred`.
    ConfigError when isolation is required and not available, or the command is not found."""
    command, cwd = str(params.command), params.cwd or os.getcwd()
    found = shutil.which(command, path=os.environ.get("PATH", SAFE_PATH)) if "/" not in command else (
        os.path.join(cwd, command))
    if found is None or not os.path.exists(found):
        raise ConfigError(f"The command {command!r} of the MCP server {params.name!r} was not found")
    available = probe()
    bwrap = bwrap_path()
    if bwrap is None:
        if params.isolation == "required":
            raise ConfigError(f"The MCP server {params.name!r} must run isolated (isolation: required), and "
                              f"{available.detail}; install bubblewrap, or set `isolation: preferred` on it")
        return found, list(params.args), dict(params.env)
    inside = {"PATH": f"{os.path.dirname(found)}:{SAFE_PATH}", "HOME": "/tmp", **params.env}  # noqa: S108
    argv = server_sandbox(bwrap, [found, *params.args], cwd, params.read, params.write, params.network)
    return argv[0], argv[1:], inside


class McpConnection:
    def __init__(self, params: ServerParams, timing: McpTiming, on_up: Callable[[McpConnection], None]) -> None:
        self.params, self.timing, self.on_up = params, timing, on_up
        self.state: State = "starting"
        self.error: str | None = None
        self.tools: list[McpTool] = []
        self.connects = 0  # successful connections; more than one means it was restarted
        self.since = time.time()
        self._client: Client | None = None
        self._broken = asyncio.Event()
        self._check = asyncio.Event()
        self._settled = asyncio.Event()  # the first attempt ended (up or down)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._redact = SecretRedactor(params.secrets)
        self._errlog: _StderrToLog | None = None

    def describe(self, exc: BaseException) -> str:
        """`describe`, with the server's secrets redacted and no control characters: for logs, the model
        and `mcp tools`; a server that died before it was up adds its stderr's last lines."""
        text = describe(exc)
        if self.connects == 0 and self._errlog is not None and (tail := self._errlog.tail(1.0)):
            text += f" (its stderr ended: {tail})"
        return printable(self._redact(text), one_line=True)
    @property
    def name(self) -> str:
        return self.params.name

    # --- life cycle ----------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the supervisor; return when the first attempt is over (or after the start-up time)."""
        self._task = asyncio.get_running_loop().create_task(self._supervise(), name=f"mcp:{self.name}")
        try:
            await asyncio.wait_for(self._settled.wait(), self.timing.startup + 1)
        except TimeoutError:
            pass

    async def stop(self) -> None:
        self._stop.set()
        self._broken.set()
        task = self._task
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=STOP_SECONDS)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=STOP_SECONDS)
        self._set("stopped", self.error)

    def _set(self, state: State, error: str | None) -> None:
        if state != self.state:
            self.since = time.time()
        self.state, self.error = state, error

    async def _supervise(self) -> None:
        delay = self.timing.backoff_base
        while not self._stop.is_set():
            self._broken = asyncio.Event()
            started = time.monotonic()
            try:
                await self._session()
            except Exception as exc:
                if not self._stop.is_set():
                    why = await asyncio.to_thread(self.describe, exc)  # may wait a moment for stderr's end
                    log.warning("MCP server %s: %s (retrying in %g s)", self.name, why, delay)
                    self._set("down", why)
            self._client = None
            self._settled.set()
            if self._stop.is_set():
                return
            if self.state != "down":
                self._set("down", self.error or "the connection ended")
            if time.monotonic() - started > self.timing.backoff_max:
                delay = self.timing.backoff_base  # it was up a good while: start the backoff afresh
            try:
                await asyncio.wait_for(self._stop.wait(), delay)
                return
            except TimeoutError:
                delay = min(delay * 2, self.timing.backoff_max)

    async def _session(self) -> None:
        async with asyncio.timeout(self.timing.startup) as deadline, self._connect() as client:
            self.tools = await _list_tools(client)  # connecting and listing: within the start-up time
            deadline.reschedule(None)
            self._client = client
            self.connects += 1
            self._set("up", None)
            self._settled.set()
            log.info("MCP server %s is up (%s tools)", self.name, len(self.tools))
            self.on_up(self)
            await self._watch(client)

    async def _watch(self, client: Client) -> None:
        """Until stopped or broken: every `health` seconds (or when a call timed out) list the tools."""
        while not self._broken.is_set():
            waiters = {asyncio.ensure_future(self._broken.wait()), asyncio.ensure_future(self._check.wait())}
            _, pending = await asyncio.wait(waiters, timeout=self.timing.health, return_when=asyncio.FIRST_COMPLETED)
            for waiter in pending:
                waiter.cancel()
            if self._broken.is_set():
                return
            self._check.clear()
            try:
                async with asyncio.timeout(self.timing.health_timeout):
                    tools = await _list_tools(client)
            except TimeoutError:
                raise ServerLost(f"no answer within {self.timing.health_timeout:g} s") from None
            if _schemas(tools) != _schemas(self.tools):
                self.tools = tools
                self.on_up(self)

    @asynccontextmanager
    async def _connect(self) -> AsyncGenerator[Client]:
        info = Implementation(name="yokebot", version="0.1.0")
        p = self.params
        async with AsyncExitStack() as stack:
            transport: Any
            if p.transport == "stdio":
                self._errlog = None
                command, args, env = await asyncio.to_thread(launch, p)  # the first probe runs bwrap once
                errlog = self._errlog = _StderrToLog(self.name, self._redact)
                stack.callback(errlog.close)
                server = StdioServerParameters(command=command, args=args, env=env, cwd=p.cwd)
                transport = stdio_client(server, errlog=errlog.file)
            else:
                # no read timeout: a call is bounded by the executor's timeout, a health check by its own
                http = httpx2.AsyncClient(headers=p.headers, timeout=httpx2.Timeout(10.0, read=None),
                                          event_hooks={"request": [_trace_context]})
                await stack.enter_async_context(http)
                # no DELETE on close: after a hang it would wait out the read timeout; sessions expire anyway
                transport = streamable_http_client(str(p.url), http_client=http, terminate_on_close=False)
            client = await stack.enter_async_context(Client(transport, cache=None, client_info=info))
            yield client

    # --- calls ---------------------------------------------------------------------------------------
    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        client = self._client
        if client is None or self.state != "up":
            why = f" ({self.error})" if self.error else ""
            raise ServerUnavailable(f"the MCP server {self.name!r} is {self.state}{why}; it is being reconnected "
                                    "in the background, so try again later or do without it")
        try:
            return await client.call_tool(tool, arguments)
        except asyncio.CancelledError:
            self._check.set()  # timed out (or shutting down): is the server still answering?
            raise
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise  # the server answered with an error: the model reads it
            self._lost(self.describe(exc))
            raise ServerLost(f"the MCP server {self.name!r} went away during the call ({self.describe(exc)}); "
                             "it is being restarted") from None
        except Exception as exc:
            self._lost(self.describe(exc))
            raise ServerLost(f"the connection to the MCP server {self.name!r} broke during the call "
                             f"({self.describe(exc)}); it is being reconnected") from None

    def _lost(self, error: str) -> None:
        if self.state == "up":
            self._set("down", error)
        self._broken.set()


async def _trace_context(request: httpx2.Request) -> None:
    """A request made for a traced tool call carries its `traceparent` (the transport sends each message in
    its sender's context, so the tool call's task is seen here)."""
    for name, value in outgoing().items():
        request.headers.setdefault(name, value)


async def _list_tools(client: Client) -> list[McpTool]:
    tools: list[McpTool] = []
    cursor: str | None = None
    for _ in range(100):  # a paginator that never ends cannot hang the start
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _schemas(tools: list[McpTool]) -> list[tuple[str, str | None, Any]]:
    return [(t.name, t.description, t.input_schema) for t in tools]
