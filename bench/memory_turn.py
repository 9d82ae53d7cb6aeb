"""Benchmark 12b: what recalling memories by relevance costs benchmark 1's turn (issue 39: at most 5% more).

Benchmark 1's turn (3 model calls, 2 tool calls, a new thread each time, full audit), interleaved in rounds, on
SQLite and on PostgreSQL, with the bench agent's memory:
  (off)   `memory: {recall: 0}`: no memory section, nothing read (the baseline),
  (empty) the default recall (8) with no fact stored: the read a new install pays,
  (1k)    the default recall over the labelled fixture's 1,000 facts, stored for every channel: each turn's
          message ("run the two echoes") matches some of them ("... the nightly backup job runs"), so the
          recall counts, reads and scores candidates.
Prints the medians and the ratios empty/off and 1k/off (target <= 1.05).

    python -m bench.memory_turn [-n 200] [--no-pg] [--quick]
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from bench._common import (
    BENCH_AGENT,
    bench_settings,
    fake_llm,
    header,
    median_ms,
    pg_available,
    pg_database,
    ready,
    registry,
    sqlite_url,
    turns_main,
    verdict,
    workdir,
)
from bench.memory_fixture import FIXTURE
from bench.overhead import YokeTurns, interleaved
from bot.app import App, build_app

TARGET = 1.05


@asynccontextmanager
async def app_with(db_url: str, base_url: str, where: Path, recall: int, facts: list[str]) -> AsyncIterator[App]:
    agents = where / "agents"
    (agents / "bench").mkdir(parents=True, exist_ok=True)
    (agents / "bench" / "AGENT.md").write_text(BENCH_AGENT.replace("---\n", f"---\nmemory: {{recall: {recall}}}\n", 1))
    app = await build_app(bench_settings(db_url, base_url, agents), registry=registry())
    for fact in facts:
        await app.store.memory.remember("bench", None, fact, None)
    await ready(app)
    try:
        yield app
    finally:
        await app.close()


async def run(n: int, rounds: int, use_pg: bool) -> dict[str, float]:
    header(f"12b. memory recall on benchmark 1's turn ({n} turns per variant)")
    facts: list[str] = json.loads(FIXTURE.read_text())["facts"]
    out: dict[str, float] = {}
    with fake_llm(0.0) as base_url, workdir() as wd:
        async with AsyncExitStack() as stack:
            databases = [("SQLite", [sqlite_url(wd, f"{v}.db") for v in ("off", "empty", "1k")])]
            if use_pg and await pg_available():
                databases.append(("PostgreSQL", [await stack.enter_async_context(pg_database()) for _ in range(3)]))
            elif use_pg:
                print("PostgreSQL is not reachable: its variants are skipped")
            for name, urls in databases:
                variants = {}
                for (label, recall, stored), url in zip((("off", 0, []), ("empty", 8, []), ("1k", 8, facts)), urls,
                                                        strict=True):
                    app = await stack.enter_async_context(app_with(url, base_url, wd / f"{name}-{label}", recall,
                                                                   stored))
                    variants[label] = YokeTurns(app, label)
                times = await interleaved(variants, n, rounds)
                out.update(report(name, times))
    return out


def report(name: str, times: dict[str, list[float]]) -> dict[str, float]:
    med = {k: median_ms(v) for k, v in times.items()}
    print(f"  {name}:")
    for label, what in (("off", "memory off (recall: 0)"), ("empty", "recall 8, no fact stored"),
                        ("1k", "recall 8 over 1,000 facts")):
        print(f"    ({label:5}) {what:28} median {med[label]:7.2f} ms/turn   ({len(times[label])} turns)")
    out: dict[str, float] = {}
    for label in ("empty", "1k"):
        ratio = med[label] / med["off"]
        out[f"{name.lower()}_{label}/off"] = ratio
        print(f"    {label}/off = {ratio:.3f}   target <= {TARGET}   {verdict(ratio <= TARGET)}")
    return out


def main(argv: list[str] | None = None) -> dict[str, float]:
    return turns_main(argv, "memory recall's cost on benchmark 1's turn", 200, run)

if __name__ == "__main__":
    main()
