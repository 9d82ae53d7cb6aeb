"""Benchmark 3: prompt assembly at scale, and the size of a 'hello' prompt.

A database grows to 100, 1,000 and 10,000 sessions of 50 messages each (bulk-loaded); at each size we time
building the prompt for one random session, the way a turn does it: `store.load_thread(...)`, then
`PromptBuilder.system_message(...)` (system prompt, memory recall) and the turn's window fitting the thread
and the tool schemas (`ThreadWindow.prepare`), with the shipped `ops` profile. The time must not grow
with the table.

Tokens are estimated as characters / 4 of the JSON request body (OpenAI's rule of thumb for English; no
tokenizer is installed because tiktoken downloads its encodings at run time, which this machine cannot)."""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import time
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench._common import ROOT, header, median_ms, percentile, pg_available, pg_database, verdict, workdir
from bot.engine.context.prompt import PromptBuilder
from bot.engine.context.tokens import Calibration, TokenCounter, default_window
from bot.engine.context.window import ThreadWindow
from bot.engine.messages import Message, Scope, Thread
from bot.engine.model.wire import ModelRequest, request_payload
from bot.engine.spec.profiles import AgentProfile, ProfileLoader
from bot.store.db import create_engine, ensure_schema
from bot.store.repositories import SqlStore
from bot.tools import builtin_tools

MESSAGES_PER_SESSION = 50
TARGET_TOKENS, TARGET_GROWTH = 2000, 1.5  # growth: median at the largest size / at the smallest


def estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def session_messages(sid: str, now: datetime) -> list[tuple[Any, ...]]:
    """50 messages: 12 turns of user / assistant tool call / tool result / answer, then user + answer."""
    rows: list[tuple[Any, ...]] = []
    for t in range(12):
        turn, call_id = f"{sid}-t{t}", f"call_{sid}_{t}"
        calls = json.dumps(
            [{"id": call_id, "name": "read_file", "arguments": '{"path": "/var/log/nginx/error.log"}'}]
        )
        rows += [
            (sid, turn, "user", f"question {t}: is nginx healthy?", None, None, None, now),
            (sid, turn, "assistant", "", calls, None, None, now),
            (
                sid,
                turn,
                "tool",
                "2025/01/01 12:00:00 [error] upstream timed out " * 4,
                None,
                call_id,
                "read_file",
                now,
            ),
            (
                sid,
                turn,
                "assistant",
                f"Answer {t}: degraded, 3 upstream timeouts in the last hour.",
                None,
                None,
                None,
                now,
            ),
        ]
    rows += [
        (sid, f"{sid}-t12", "user", "and now?", None, None, None, now),
        (sid, f"{sid}-t12", "assistant", "Healthy again.", None, None, None, now),
    ]
    return rows


class Loader:
    """Bulk-loads sessions straight through the driver: the ORM would take minutes for 500,000 rows."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def add(self, first: int, count: int) -> None:
        now = datetime.now(UTC)
        sessions = [
            (f"s{i:06d}", "bench", "c1", f"thread-{i}", "ops", now, now) for i in range(first, first + count)
        ]
        messages = [m for s in sessions for m in session_messages(s[0], now)]
        if self.url.startswith("sqlite"):
            await asyncio.to_thread(self._sqlite, sessions, messages)
        else:
            await self._pg(sessions, messages)

    def _sqlite(self, sessions: list[tuple[Any, ...]], messages: list[tuple[Any, ...]]) -> None:
        def ts(row: tuple[Any, ...], *cols: int) -> tuple[Any, ...]:
            return tuple(v.strftime("%Y-%m-%d %H:%M:%S.%f") if i in cols else v for i, v in enumerate(row))

        conn = sqlite3.connect(self.url.split("///", 1)[1])
        with conn:
            conn.executemany(
                "INSERT INTO sessions (id, platform, channel, thread, agent, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [ts(s, 5, 6) for s in sessions],
            )
            conn.executemany(
                "INSERT INTO messages (session_id, turn_id, role, content, tool_calls, tool_call_id, "
                "name, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [ts(m, 7) for m in messages],
            )
        conn.execute("ANALYZE")
        conn.close()

    async def _pg(self, sessions: list[tuple[Any, ...]], messages: list[tuple[Any, ...]]) -> None:
        import asyncpg

        conn = await asyncpg.connect(self.url.replace("postgresql+asyncpg", "postgresql"))
        try:
            await conn.copy_records_to_table(
                "sessions",
                records=sessions,
                columns=["id", "platform", "channel", "thread", "agent", "created_at", "updated_at"],
            )
            await conn.copy_records_to_table(
                "messages",
                records=messages,
                columns=[
                    "session_id",
                    "turn_id",
                    "role",
                    "content",
                    "tool_calls",
                    "tool_call_id",
                    "name",
                    "created_at",
                ],
            )
            await conn.execute("ANALYZE sessions; ANALYZE messages")
        finally:
            await conn.close()


MODEL = "gpt-5-mini"
COUNTER = TokenCounter(MODEL)  # one per model and process, as the loop keeps it


async def first_prompt(builder: PromptBuilder, profile: AgentProfile, scope: Scope,
                       thread: Thread) -> tuple[tuple[Message, ...], tuple[dict[str, Any], ...]]:
    """The first model call of a turn on `thread`: its messages and tool schemas (no compaction call)."""
    tools = builtin_tools()
    schemas = tuple(tools[n].schema() for n in profile.tools if n in tools)
    window = ThreadWindow(thread, spec=profile.context, window=profile.context_window or default_window(MODEL),
                          model=MODEL, counter=COUNTER, calibration=Calibration())
    system = await builder.system_message(profile, scope)
    fitted = await window.prepare(system, [Message.user("hello")], schemas)
    return fitted.messages, schemas


async def build_once(store: SqlStore, builder: PromptBuilder, profile: AgentProfile, sid: str) -> float:
    start = time.perf_counter()
    thread = await store.load_thread(sid, profile.max_history_turns)
    messages, _ = await first_prompt(builder, profile, Scope("bench", "c1", "t"), thread)
    elapsed = time.perf_counter() - start
    if len(messages) < 40:
        raise RuntimeError(f"the history of {sid} came back short ({len(messages)} messages)")
    return elapsed


async def measure(url: str, sizes: list[int], builds: int) -> dict[int, float]:
    profile = ProfileLoader(ROOT / "agents", builtin_tools()).load("ops")
    engine = create_engine(url)
    await ensure_schema(engine)
    store, loader, loaded, out = SqlStore(engine), Loader(url), 0, {}
    builder = PromptBuilder(memory=store.memory)
    try:
        for size in sizes:
            started = time.perf_counter()
            await loader.add(loaded, size - loaded)
            loaded = size
            load_s = time.perf_counter() - started
            ids = [f"s{random.randrange(size):06d}" for _ in range(builds)]
            for sid in ids[:10]:  # warm-up
                await build_once(store, builder, profile, sid)
            times = [await build_once(store, builder, profile, sid) for sid in ids]
            out[size] = median_ms(times)
            print(
                f"  {size:>6} sessions ({size * MESSAGES_PER_SESSION:>7} messages, "
                f"loaded in {load_s:4.1f} s): "
                f"prompt build median {out[size]:6.2f} ms, p95 {percentile(times, 95) * 1000:6.2f} ms"
            )
    finally:
        await engine.dispose()
    growth = out[sizes[-1]] / out[sizes[0]]
    print(
        f"  growth {sizes[0]} -> {sizes[-1]} sessions: {growth:.2f}x   "
        f"[target: flat, <= {TARGET_GROWTH}x within noise: {verdict(growth <= TARGET_GROWTH)}]"
    )
    return out


def hello_tokens() -> dict[str, int]:
    profile = ProfileLoader(ROOT / "agents", builtin_tools()).load("ops")
    messages, schemas = asyncio.run(first_prompt(PromptBuilder(), profile, Scope("slack", "C1", "t"), Thread()))
    body = json.dumps(request_payload(ModelRequest(MODEL, messages, schemas)))
    system = messages[0].content
    out = {
        "request_chars": len(body),
        "tokens": estimate_tokens(body),
        "system_tokens": estimate_tokens(system),
        "tools_tokens": estimate_tokens(json.dumps(schemas)),
    }
    print(
        f"  'hello' with the ops profile: request body {out['request_chars']} chars ~ {out['tokens']} tokens "
        f"(system prompt ~{out['system_tokens']}, {len(schemas)} tool schemas ~{out['tools_tokens']}); "
        f"estimate = chars/4   [target < {TARGET_TOKENS}: {verdict(out['tokens'] < TARGET_TOKENS)}]"
    )
    return out


async def run(sizes: list[int], builds: int, backends: list[str]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with workdir() as wd:
        for backend in backends:
            print(f"  -- {backend}")
            async with AsyncExitStack() as stack:
                if backend == "postgresql":
                    if not await pg_available():
                        print("  PostgreSQL is not reachable: skipped")
                        continue
                    url = await stack.enter_async_context(pg_database())
                else:
                    url = f"sqlite+aiosqlite:///{Path(wd) / 'scale.db'}"
                results[backend] = await measure(url, sizes, builds)
    return results


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description="Benchmark 3: prompt assembly at scale")
    p.add_argument("--quick", action="store_true", help="100 and 1,000 sessions, SQLite only")
    p.add_argument("--builds", type=int, default=200, help="prompt builds timed at each size")
    p.add_argument("--no-pg", action="store_true", help="skip PostgreSQL")
    args = p.parse_args(argv)
    sizes = [100, 1000] if args.quick else [100, 1000, 10000]
    backends = ["sqlite"] if args.quick or args.no_pg else ["sqlite", "postgresql"]
    header(f"3. prompt assembly at scale ({MESSAGES_PER_SESSION} messages per session)")
    out = asyncio.run(run(sizes, 50 if args.quick else args.builds, backends))
    out["hello"] = hello_tokens()
    return out


if __name__ == "__main__":
    main()
