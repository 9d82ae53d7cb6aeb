"""Benchmark 11: what a delegation costs (docs/delegation.md).

Overhead, on SQLite, zero model latency (the fake model in its own process), the variants interleaved:
  (a) the lead calls `echo` once, then answers: 2 model calls, 1 tool call;
  (c) the lead calls `echo` twice, then answers: 3 model calls, 2 tool calls (one more step than (a));
  (b) the lead calls `delegate`, whose sub-agent answers at once, then answers: 3 model calls (one of them the
      sub-agent's), 1 tool call, and a child turn (its session, its `turns` row, its rows, its flush).
The delegation overhead beyond the sub-agent's own model call is b - c (a step's model call is in both), in
wall time and in this process's CPU time (every thread: the SQLite writer's too), which a loaded machine
inflates less; target <= 2 ms.

At once, 300 ms per model call: a tree with one sub-agent (3 calls in a row: 0.9 s) against a tree whose lead
hands three tasks to three sub-agents in one reply (they run at the same time); target <= 1.3x."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from bench._common import bench_settings, fake_llm, header, median_ms, ready, sqlite_url, verdict, workdir
from bench._common import registry as bench_registry
from bench._common import run as bench_run
from bench.fake_llm import FINAL_ANSWER, SUB_ANSWER
from bot.app import App, build_app
from bot.engine.service import TurnRequest

TARGET_OVERHEAD_MS, TARGET_AT_ONCE = 2.0, 1.3
LEAD = """---
description: the lead
tools: [echo]
delegate: [sub]
max_iterations: 6
---
You are the lead.
"""
SUB = """---
description: answers at once
tools: [echo]
max_iterations: 3
---
You are the sub-agent.
"""


def agents(base: Path) -> Path:
    for name, text in (("lead", LEAD), ("sub", SUB)):
        (base / "agents" / name).mkdir(parents=True, exist_ok=True)
        (base / "agents" / name / "AGENT.md").write_text(text)
    return base / "agents"


class Turns:
    def __init__(self, app: App) -> None:
        self.app, self.n = app, 0

    async def __call__(self, text: str) -> float:
        return (await self.both(text))[0]

    async def both(self, text: str) -> tuple[float, float]:
        """(wall seconds, CPU seconds of this process: every thread, the SQLite writer's too)."""
        self.n += 1
        req = TurnRequest("bench", "c1", f"t{self.n}", text, "lead", "mention", "u1")
        started, cpu = time.perf_counter(), time.process_time()
        result = await self.app.service.handle(req)
        took = time.perf_counter() - started, time.process_time() - cpu
        if result.answer != FINAL_ANSWER or any(r.status != "ok" for r in result.tool_calls):
            raise RuntimeError(f"unexpected turn: {result}")
        if text.startswith("delegate") and {r.content for r in result.tool_calls} != {SUB_ANSWER}:
            raise RuntimeError(f"the sub-agent did not answer: {result.tool_calls}")
        return took


async def build(db: str, base_url: str, wd: Path) -> App:
    app = await build_app(bench_settings(db, base_url, agents(wd), default_agent="lead"), registry=bench_registry())
    await ready(app)
    return app


async def overhead(n: int, rounds: int) -> dict[str, float]:
    header(f"11. delegation overhead ({n} turns per variant, SQLite, zero model latency)")
    variants = {"a": "echo 1", "c": "echo 2", "b": "delegate 1"}
    with fake_llm(0.0, "--tree") as base_url, workdir() as wd:
        app = await build(sqlite_url(wd), base_url, wd)
        try:
            turn = Turns(app)
            for text in variants.values():  # warm-up: connections, caches, compiled statements
                for _ in range(max(3, n // 10)):
                    await turn(text)
            times: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
            names = list(variants)
            for r in range(rounds):
                for name in names[r % 3:] + names[:r % 3]:
                    times[name] += [await turn.both(variants[name]) for _ in range(max(1, n // rounds))]
        finally:
            await app.close()
    ms = {k: median_ms([w for w, _ in v]) for k, v in times.items()}
    cpu = {k: median_ms([c for _, c in v]) for k, v in times.items()}
    over, over_cpu = ms["b"] - ms["c"], cpu["b"] - cpu["c"]
    print(f"  (a) echo once        {ms['a']:7.2f} ms   2 model calls, 1 tool call")
    print(f"  (c) echo twice       {ms['c']:7.2f} ms   3 model calls, 2 tool calls   c/a = {ms['c'] / ms['a']:.2f}")
    print(f"  (b) delegate once    {ms['b']:7.2f} ms   3 model calls (1 the sub-agent's), 1 child turn   "
          f"b/a = {ms['b'] / ms['a']:.2f}, b/c = {ms['b'] / ms['c']:.2f}")
    print(f"  CPU of this process per turn: a {cpu['a']:.2f} ms, c {cpu['c']:.2f} ms, b {cpu['b']:.2f} ms")
    print(f"  delegation overhead beyond the sub-agent's model call: b - c = {over:.2f} ms wall, {over_cpu:.2f} ms CPU "
          f"(target <= {TARGET_OVERHEAD_MS:g} ms) {verdict(min(over, over_cpu) <= TARGET_OVERHEAD_MS)}")
    return {**ms, "overhead_ms": over, "overhead_cpu_ms": over_cpu}


async def at_once(n: int, latency: float) -> dict[str, float]:
    header(f"11. three sub-agents at once ({latency * 1000:.0f} ms per model call, {n} trees each)")
    with fake_llm(latency, "--tree") as base_url, workdir() as wd:
        app = await build(sqlite_url(wd), base_url, wd)
        try:
            turn = Turns(app)
            await turn("delegate 1")  # warm-up
            one, three = [], []
            for _ in range(n):
                one.append(await turn("delegate 1"))
                three.append(await turn("delegate 3"))
        finally:
            await app.close()
    t1, t3 = statistics.median(one), statistics.median(three)
    ratio = t3 / t1
    print(f"  one sub-agent:    {t1:6.3f} s (3 model calls in a row: ideal {3 * latency:.1f} s)")
    print(f"  three at once:    {t3:6.3f} s   three/one = {ratio:.2f} (target <= {TARGET_AT_ONCE:g}) "
          f"{verdict(ratio <= TARGET_AT_ONCE)}")
    return {"one_s": t1, "three_s": t3, "ratio": ratio}


async def amain(quick: bool) -> dict[str, dict[str, float]]:
    return {"overhead": await overhead(30 if quick else 300, 3 if quick else 10),
            "at_once": await at_once(1 if quick else 5, 0.3)}


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    p = argparse.ArgumentParser(description="yokebot benchmark 11: delegation")
    p.add_argument("--quick", action="store_true", help="a short run: a smoke test, not figures")
    p.add_argument("--no-pg", action="store_true", help="(SQLite only anyway)")
    args = p.parse_args(argv)
    return bench_run(amain(args.quick))


if __name__ == "__main__":
    main()
