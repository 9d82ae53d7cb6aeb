"""Test-only tools and small helpers shared by the tests."""

from __future__ import annotations

import asyncio
import inspect
import shutil
import socket
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from bot.engine.errors import ToolRetry
from bot.engine.guard import CLOSE, OPEN
from bot.engine.run.context import ToolContext
from bot.engine.run.tooling import Tool, tool
from bot.tools import builtin_tools

if TYPE_CHECKING:
    from bot.app import App
    from bot.chat.discord.adapter import DiscordAdapter
    from bot.chat.slack.adapter import SlackAdapter

FLAKY_CALLS: Counter[str] = Counter()


@tool("echo", "Echo the text back. Use it in tests.")
async def echo(ctx: ToolContext, text: str, times: int = 1) -> str:
    return " ".join([text] * times)


@tool("boom", "Always raises. Use it in tests.")
async def boom(ctx: ToolContext, reason: str = "kaput") -> str:
    raise RuntimeError(reason)


@tool("slow", "Sleeps. Use it in tests.", timeout=0.3)
async def slow(ctx: ToolContext, seconds: float = 5.0) -> str:
    await asyncio.sleep(seconds)
    return "woke up"


@tool("flaky", "Fails twice with a transient error, then works. Use it in tests.")
async def flaky(ctx: ToolContext, key: str) -> str:
    FLAKY_CALLS[key] += 1
    if FLAKY_CALLS[key] < 3:
        raise ToolRetry(f"transient failure {FLAKY_CALLS[key]}")
    return f"worked on attempt {FLAKY_CALLS[key]}"


RESTARTS: Counter[str] = Counter()


@tool("restart_service", "Restart a service (counts its runs). Use it in tests.")
async def restart_service(ctx: ToolContext, service: str) -> str:
    RESTARTS[service] += 1
    return f"{service} restarted (run {RESTARTS[service]})"


SHIPPED = Path(__file__).resolve().parents[1] / "agents"


def copy_shipped_ops(agents: Path) -> Path:
    """Copy the shipped agents/ops into `agents`, with the sub-agents it hands work to (its `delegate:`);
    returns the copy's AGENT.md."""
    for name in ("ops", "logs", "metrics"):
        shutil.copytree(SHIPPED / name, agents / name, dirs_exist_ok=True)
    return agents / "ops" / "AGENT.md"


def registry() -> dict[str, Tool]:
    return {**builtin_tools(), **{t.name: t for t in (echo, boom, slow, flaky, restart_service)}}


def write_agent(agents_dir: Path, name: str, front: str, body: str = "You are a test agent.",
                files: dict[str, str] | None = None) -> Path:
    base = agents_dir / name
    base.mkdir(parents=True, exist_ok=True)
    for rel, text in (files or {}).items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
    path = base / "AGENT.md"
    path.write_text(f"---\n{front.strip()}\n---\n{body}\n")
    return path


async def eventually(predicate: Any, timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll `predicate()` (sync or async) until it is truthy and return that value; the fakes run in other
    threads, so what a test waits for arrives on its own time."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def unwrap(text: str) -> str:
    """A tool result as the tool wrote it: the untrusted-content markers around it taken off (the markers
    themselves are tested in tests/engine/test_guardrails.py and tests/security/test_untrusted_markers.py)."""
    end = text.rfind("\n" + CLOSE)
    if text.startswith(OPEN) and end > 0:  # a note of ours may follow the block (the loop guard's)
        return text[text.index("\n") + 1: end] + text[end + len(CLOSE) + 1:]
    return text


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool messages of a model request, their contents unwrapped (`unwrap`)."""
    return [{**m, "content": unwrap(m["content"])} for m in request["messages"] if m["role"] == "tool"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on (for a `yokebot run` started by a test)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def db_rows(url: str, sql: str) -> list[Any]:
    """Rows of one statement, on an engine of its own (a test reading what another process wrote; an UPDATE
    with RETURNING is committed)."""
    from sqlalchemy import text

    from bot.store.db import create_engine

    engine = create_engine(url, pooled=True)  # through a transaction pooler too (no named statement)
    try:
        async with engine.begin() as conn:
            return list((await conn.execute(text(sql))).all())
    finally:
        await engine.dispose()


def build_slack(app: App) -> SlackAdapter | None:
    """The Slack adapter alone, as `yokebot run` builds it (tests and benchmarks drive it directly)."""
    from bot.app import build_one

    return cast("SlackAdapter | None", build_one(app, "slack"))


def build_discord(app: App) -> DiscordAdapter | None:
    """The Discord adapter alone, as `yokebot run` builds it (not connected yet: `start()` it)."""
    from bot.app import build_one

    return cast("DiscordAdapter | None", build_one(app, "discord"))
