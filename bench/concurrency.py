"""Benchmark 2: many sessions at once. 200 sessions each run the 3-call, 2-tool turn at the same moment,
with 300 ms of model latency per call (the fake model runs in its own process).

The bare openai loop of benchmark 1 runs the same burst first, as the reference for what the SDK alone
costs on this machine. Reports the wall time against the ideal (3 x latency: every turn's calls overlap
perfectly), turns/s, and
the longest event-loop stall, measured by a ticker that sleeps 5 ms and records how late it wakes."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import openai

from bench._common import (
    USER_TEXT,
    StallMeter,
    bench_app,
    fake_llm,
    header,
    percentile,
    pg_available,
    pg_database,
    sqlite_url,
    verdict,
    workdir,
)
from bench._common import (
    run as bench_run,
)
from bench.fake_llm import FINAL_ANSWER
from bench.overhead import bare_turn
from bot.app import App
from bot.engine.service import TurnRequest

TARGET_RATIO, TARGET_STALL_MS, TARGET_P99_MS = 1.5, 50.0, 20.0


Turn = Callable[[int], Awaitable[str]]


def yoke(app: App, label: str) -> Turn:
    async def turn(i: int) -> str:
        req = TurnRequest(
            platform="bench",
            channel="c1",
            thread=f"{label}-{i}",
            text=USER_TEXT,
            agent="bench",
            trigger="mention",
            user=f"u{i}",
        )
        result = await app.service.handle(req)
        if result.iterations != 3 or result.error:
            raise RuntimeError(f"unexpected turn: {result}")
        return result.answer

    return turn


async def timed(turn: Turn, i: int) -> float:
    start = time.perf_counter()
    if await turn(i) != FINAL_ANSWER:
        raise RuntimeError("unexpected answer")
    return time.perf_counter() - start


async def burst(turn: Turn, sessions: int, offset: int = 0) -> tuple[float, list[float], StallMeter]:
    with StallMeter() as meter:
        await asyncio.sleep(0.05)  # the ticker is running before the burst
        start = time.perf_counter()
        latencies = await asyncio.gather(*(timed(turn, offset + i) for i in range(sessions)))
        wall = time.perf_counter() - start
    return wall, list(latencies), meter


async def make_turn(stack: AsyncExitStack, backend: str, base_url: str, wd: Path) -> Turn | None:
    if backend == "bare":
        client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
        stack.push_async_callback(client.close)
        return lambda _i: bare_turn(client, USER_TEXT)
    if backend == "postgresql":
        if not await pg_available():
            print("  PostgreSQL is not reachable: skipped")
            return None
        url = await stack.enter_async_context(pg_database())
    else:
        url = sqlite_url(wd, f"{backend}.db")
    return yoke(await stack.enter_async_context(bench_app(url, base_url, wd)), backend)


async def run(sessions: int, latency: float, backends: list[str]) -> dict[str, dict[str, float]]:
    ideal = 3 * latency
    header(f"2. concurrency: {sessions} sessions at once, {latency * 1000:.0f} ms model latency per call")
    out: dict[str, dict[str, float]] = {}
    with fake_llm(latency) as base_url, workdir() as wd:
        for backend in backends:
            async with AsyncExitStack() as stack:
                turn = await make_turn(stack, backend, base_url, wd)
                if turn is None:
                    continue
                await burst(turn, 5, offset=10**6)  # warm-up: connections, compiled statements
                wall, latencies, meter = await burst(turn, sessions)
            ratio, stall_ms = wall / ideal, meter.max_late * 1000
            out[backend] = {
                "wall": wall,
                "ratio": ratio,
                "turns_per_s": sessions / wall,
                "stall_ms": stall_ms,
            }
            name = "bare loop" if backend == "bare" else backend
            p99_ms = percentile(meter.lates, 99) * 1000
            print(
                f"  {name:10} wall {wall:6.2f} s (ideal {ideal:.2f} s) = {ratio:4.2f}x ideal "
                f"[target <= {TARGET_RATIO}: {verdict(ratio <= TARGET_RATIO)}]   "
                f"{sessions / wall:6.1f} turns/s"
            )
            print(
                f"  {'':10} turn latency p50 {percentile(latencies, 50):5.2f} s, "
                f"p99 {percentile(latencies, 99):5.2f} s;"
                f" longest loop stall {stall_ms:5.1f} ms, p99 tick lateness {p99_ms:5.1f} ms "
                f"[targets < {TARGET_STALL_MS:.0f} ms, p99 < {TARGET_P99_MS:.0f} ms: "
                f"{verdict(stall_ms < TARGET_STALL_MS and p99_ms < TARGET_P99_MS)}]"
            )
    return out


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    p = argparse.ArgumentParser(description="Benchmark 2: concurrency")
    p.add_argument("--quick", action="store_true", help="50 sessions, SQLite only")
    p.add_argument("--sessions", type=int, default=200)
    p.add_argument("--latency", type=float, default=0.3, help="model latency per call, seconds")
    p.add_argument("--no-pg", action="store_true", help="skip PostgreSQL")
    args = p.parse_args(argv)
    sessions = 50 if args.quick else args.sessions
    backends = ["bare", "sqlite"] if args.quick or args.no_pg else ["bare", "sqlite", "postgresql"]
    return bench_run(run(sessions, args.latency, backends))


if __name__ == "__main__":
    main()
