"""Benchmark 1: what the engine costs per turn on top of the model.

The same 3-call, 2-tool turn against the scripted server (own process, zero latency), N times each:
  (a) a bare loop with the openai SDK and no persistence (the tutorial minimum, `create` on the SDK's default
      httpx transport: the baseline of the ratios),
  (a+) the same bare loop on the SDK's aiohttp transport (`http_client=DefaultAioHttpClient()`), which
      yokebot's model client uses: how much of the difference is the transport (b/a+, no target),
  (b) yokebot's AgentService with full auditing on SQLite,
  (c) the same on PostgreSQL (a fresh database, dropped afterwards),
  (d) the same through a real PgBouncer in transaction pooling (its writer and locks on the direct URL, as
      docs/scale-out.md sets it up).
The variants run interleaved in rounds so that machine noise hits them alike; the figures that matter are
the ratios b/a, c/a and d/c from the same run. Then a cProfile of (b): where the event loop's time goes."""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import openai

from bench._common import (
    MODEL,
    SYSTEM_PROMPT,
    USER_TEXT,
    bench_app,
    echo,
    echo_plain,
    fake_llm,
    header,
    median_ms,
    pg_available,
    pg_database,
    pgbouncer,
    pooled,
    sqlite_url,
    verdict,
    workdir,
)
from bench._common import (
    run as bench_run,
)
from bench.fake_llm import FINAL_ANSWER
from bot.app import App
from bot.engine.service import TurnRequest

TARGET_SQLITE, TARGET_PG = 0.75, 1.0  # the full audit faster than (PostgreSQL: no slower than) the bare loop
TARGET_POOLED = 1.15  # PostgreSQL through a transaction-pooling PgBouncer against direct (issue 44)
Turn = Callable[[], Awaitable[str]]


# --- (a) the bare loop: the 30 lines any tutorial shows ---------------------------------------------------
TOOLS = [echo.schema()]
FUNCTIONS: dict[str, Callable[..., str]] = {"echo": echo_plain}


async def bare_turn(client: openai.AsyncOpenAI, text: str) -> str:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": text},
    ]
    for _ in range(10):
        response = await client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)  # type: ignore[arg-type]
        message = response.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for tc in message.tool_calls:
            result = FUNCTIONS[tc.function.name](**json.loads(tc.function.arguments))  # type: ignore[union-attr]
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": result})
    return "(iteration limit)"


# --- (b), (c): yokebot ----------------------------------------------------------------------------------
class YokeTurns:
    """Each turn is a new thread, so a new session: the common case of a fresh mention."""

    def __init__(self, app: App, label: str) -> None:
        self.app, self.label, self.n = app, label, 0

    async def __call__(self) -> str:
        self.n += 1
        req = TurnRequest(
            platform="bench",
            channel="c1",
            thread=f"{self.label}-{self.n}",
            text=USER_TEXT,
            agent="bench",
            trigger="mention",
            user="u1",
        )
        result = await self.app.service.handle(req)
        if result.iterations != 3 or len(result.tool_calls) != 2 or result.error:
            raise RuntimeError(f"unexpected turn: {result}")
        return result.answer


async def timed(turn: Turn, n: int) -> list[float]:
    times: list[float] = []
    for _ in range(n):
        start = time.perf_counter()
        answer = await turn()
        times.append(time.perf_counter() - start)
        if answer != FINAL_ANSWER:
            raise RuntimeError(f"unexpected answer {answer!r}")
    return times


async def interleaved(variants: dict[str, Turn], n: int, rounds: int) -> dict[str, list[float]]:
    for turn in variants.values():  # warm-up: connections, caches, compiled statements
        await timed(turn, max(3, n // (rounds * 2)))
    times: dict[str, list[float]] = {k: [] for k in variants}
    per_round = max(1, n // rounds)
    names = list(variants)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:  # rotate who goes first
            times[name] += await timed(variants[name], per_round)
    return times


# --- profile ----------------------------------------------------------------------------------------------
AREAS = [
    ("/bot/", "yokebot (bot/)"),
    ("/sqlalchemy/", "SQLAlchemy"),
    ("aiosqlite", "aiosqlite"),
    ("/asyncpg/", "asyncpg"),
    ("/openai/", "openai SDK"),
    ("/httpx", "httpx"),
    ("/httpcore/", "httpx"),
    ("/h11/", "httpx"),
    ("/anyio/", "httpx"),
    ("/pydantic", "pydantic"),
    ("/tenacity/", "tenacity"),
    ("/asyncio/", "asyncio"),
    ("/selectors.py", "asyncio"),
    ("/json/", "json"),
    ("/uuid.py", "uuid"),
]


def area(func: tuple[str, int, str]) -> str:
    filename = func[0]
    for needle, name in AREAS:
        if needle in filename:
            return name
    return "other"


def by_area(stats: pstats.Stats) -> dict[str, float]:
    """Own time per library; a C builtin's time goes to the library that called it."""
    totals: dict[str, float] = defaultdict(float)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for func, (_cc, _nc, tt, _ct, callers) in raw.items():
        if func[0] != "~":
            totals[area(func)] += tt
            continue
        if "poll" in func[2] and "epoll" in func[2]:
            totals["(idle: waiting in epoll)"] += tt
            continue
        caller_tt = {c: v[2] for c, v in callers.items()}
        whole = sum(caller_tt.values()) or 1.0
        for caller, share in caller_tt.items():
            totals[area(caller) if caller[0] != "~" else "other"] += tt * share / whole
    return dict(totals)


async def profile(turn: Turn, n: int, top: int) -> None:
    prof = cProfile.Profile()
    prof.enable()
    await timed(turn, n)
    prof.disable()
    stats = pstats.Stats(prof)
    areas = by_area(stats)
    busy = sum(v for k, v in areas.items() if not k.startswith("(idle"))
    print(f"profile of (b), {n} turns, event-loop thread only (SQLite runs in aiosqlite's own thread):")
    print(f"  {'where':28} {'ms/turn':>8} {'share':>6}")
    for name, secs in sorted(areas.items(), key=lambda kv: -kv[1]):
        share = "" if name.startswith("(idle") else f"{secs / busy:6.0%}"
        print(f"  {name:28} {secs / n * 1000:8.2f} {share:>6}")
    print(f"  top {top} functions by own time:")
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    rows = sorted(((v[2], f) for f, v in raw.items() if "epoll" not in f[2]), reverse=True)[:top]
    for tt, f in rows:
        where = f[0].split("site-packages/")[-1].split("/work/wt/")[-1] if f[0] != "~" else ""
        print(f"    {tt / n * 1000:7.3f} ms/turn  {f[2]}  {where}:{f[1]}")


# --- main -------------------------------------------------------------------------------------------------
async def run(n: int, rounds: int, use_pg: bool, profile_turns: int, top: int) -> dict[str, float]:
    header(f"1. engine overhead per turn ({n} turns per variant, 3 model calls + 2 tool calls each)")
    with fake_llm(0.0) as base_url, workdir() as wd:
        async with AsyncExitStack() as stack:
            client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
            stack.push_async_callback(client.close)
            variants: dict[str, Turn] = {"a": lambda: bare_turn(client, USER_TEXT)}
            # for reference: the same bare loop on the SDK's aiohttp transport, which yokebot's client uses
            aio = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0,
                                     http_client=openai.DefaultAioHttpClient())
            stack.push_async_callback(aio.close)
            variants["a+"] = lambda: bare_turn(aio, USER_TEXT)
            sqlite_app = await stack.enter_async_context(bench_app(sqlite_url(wd), base_url, wd))
            variants["b"] = YokeTurns(sqlite_app, "b")
            if use_pg and await pg_available():
                pg_url = await stack.enter_async_context(pg_database())
                pg_app = await stack.enter_async_context(bench_app(pg_url, base_url, wd))
                variants["c"] = YokeTurns(pg_app, "c")
                if shutil.which("pgbouncer") or Path("/usr/sbin/pgbouncer").exists():
                    pooler = stack.enter_context(pgbouncer("transaction"))
                    direct = await stack.enter_async_context(pg_database())
                    variants["d"] = YokeTurns(await stack.enter_async_context(
                        bench_app(pooled(pooler, direct), base_url, wd, direct_url=direct)), "d")
                else:
                    print("PgBouncer is not installed: variant (d) skipped")
            elif use_pg:
                print("PostgreSQL is not reachable: variant (c) skipped")
            times = await interleaved(variants, n, rounds)
            result = report(times)
            if profile_turns:
                await profile(variants["b"], profile_turns, top)
    return result


def report(times: dict[str, list[float]]) -> dict[str, float]:
    labels = {
        "a": "bare openai loop, no persistence",
        "a+": "the same on the aiohttp transport",
        "b": "yokebot, SQLite, full audit",
        "c": "yokebot, PostgreSQL, full audit",
        "d": "the same through PgBouncer (transaction)",
    }
    med = {k: median_ms(v) for k, v in times.items()}
    for k, v in med.items():
        print(f"  ({k}) {labels[k]:34} median {v:7.2f} ms/turn   ({len(times[k])} turns)")
    out = dict(med)
    out["b/a"] = med["b"] / med["a"]
    print(f"  b/a = {out['b/a']:.2f}   target <= {TARGET_SQLITE}   {verdict(out['b/a'] <= TARGET_SQLITE)}")
    if "c" in med:
        out["c/a"] = med["c"] / med["a"]
        print(f"  c/a = {out['c/a']:.2f}   target <= {TARGET_PG}   {verdict(out['c/a'] <= TARGET_PG)}")
    if "d" in med:
        out["d/c"] = med["d"] / med["c"]
        print(f"  d/c = {out['d/c']:.2f}   target <= {TARGET_POOLED}   {verdict(out['d/c'] <= TARGET_POOLED)}"
              "   (through PgBouncer against direct, docs/scale-out.md)")
    if "a+" in med:
        out["b/a+"] = med["b"] / med["a+"]
        print(f"  b/a+ = {out['b/a+']:.2f}   (against the bare loop on yokebot's own HTTP transport; no target)")
    return out


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(description="Benchmark 1: engine overhead per turn")
    p.add_argument("--quick", action="store_true", help="a few turns only (smoke run)")
    p.add_argument("-n", "--turns", type=int, default=300, help="turns per variant")
    p.add_argument("--no-pg", action="store_true", help="skip PostgreSQL")
    p.add_argument("--no-profile", action="store_true")
    args = p.parse_args(argv)
    n, rounds, prof = (args.turns, max(1, args.turns // 10), 100) if not args.quick else (10, 2, 5)
    if args.no_profile:
        prof = 0
    return bench_run(run(n, rounds, not args.no_pg, prof, 12))


if __name__ == "__main__":
    main()
