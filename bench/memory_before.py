"""Benchmark 12c: benchmark 1's turn with memory on, the code before issue 39 against today's (issue 39: the
turn's hot path no more than 5% slower than before when memory is on).

The code before is `2650ac3^` (its memory section: the 50 newest facts), its `bot/` exported with `git archive`
into a temporary directory; today's is this checkout. Each runs in its own process (`--worker`), on the same
driver (this file, bench/_common.py, bench/overhead.py's YokeTurns), the same .venv and the same fake model (its
own process), on databases made by its own migrations, with two apps:
  (empty) the bench agent's memory as shipped (no `memory:` key), no fact stored,
  (1k)    the labelled fixture's 1,000 facts stored for every channel through that version's `remember`
          (benchmark 1's message matches some of them).
On PostgreSQL each database is ANALYZEd once its facts are stored, as autovacuum would have done.
The two processes take turns on command over a pipe: each round, a batch of turns per version and case, the
order rotating, so that the machine's load hits both alike; on SQLite, then on PostgreSQL. Prints per case the
medians of every turn, now/before (target <= 1.05), and the per-round ratios (the batches' medians) with their
spread.

    python -m bench.memory_before [-n 400] [--no-pg] [--quick] [--also REV ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import text as sql_text

import bot
from bench._common import (
    ROOT,
    bench_app,
    fake_llm,
    header,
    median_ms,
    percentile,
    pg_available,
    pg_database,
    sqlite_url,
    turns_main,
    verdict,
    workdir,
)
from bench._common import run as bench_run
from bench.memory_fixture import FIXTURE
from bench.overhead import YokeTurns, timed

BEFORE = "2650ac3^"  # the parent of issue 39's commit (memory recalled by relevance)
TARGET = 1.05
CASES = ("empty", "1k")
MARK = "@@ "  # the worker's answers on stdout, apart from anything else printed there


# --- the worker: one version's code in its own process -----------------------------------------------------
async def worker(base_url: str, where: Path, urls: list[str]) -> None:
    """Build one app per case, then run batches of turns on command (`CASE K` on stdin; on stdout as JSON each
    turn's wall time and the batch's CPU time per turn, every thread of this process) until stdin closes."""
    facts: list[str] = json.loads(FIXTURE.read_text())["facts"]
    async with AsyncExitStack() as stack:
        turns: dict[str, YokeTurns] = {}
        for case, url in zip(CASES, urls, strict=True):
            app = await stack.enter_async_context(bench_app(url, base_url, where))
            if case == "1k":
                # before issue 39 the store itself remembered; since, its `memory` does
                memory: Any = getattr(app.store, "memory", app.store)
                for fact in facts:
                    await memory.remember("bench", None, fact, None)
            if app.store.engine.dialect.name == "postgresql":  # the statistics autovacuum would have made by the
                async with app.store.engine.begin() as conn:  # time a memory holds 1,000 facts (when it makes them
                    await conn.execute(sql_text("ANALYZE"))  # during a run, the plans change under the timing)
            turns[case] = YokeTurns(app, case)
        say(f"READY {Path(bot.__file__).resolve().parent}")
        loop = asyncio.get_running_loop()
        while command := (await loop.run_in_executor(None, sys.stdin.readline)).split():
            case, k = command
            cpu = time.process_time()
            walls = await timed(turns[case], int(k))
            say(json.dumps({"wall": walls, "cpu": (time.process_time() - cpu) / len(walls)}))


def say(line: str) -> None:
    print(f"{MARK}{line}", flush=True)


@dataclass
class Batch:
    wall: list[float]  # per turn, s
    cpu: float  # per turn, s: the batch's CPU time (the worker's every thread) over its turns


class Worker:
    """The parent's end of a worker process."""

    def __init__(self, version: str, proc: asyncio.subprocess.Process) -> None:
        self.version, self.proc = version, proc

    @classmethod
    async def start(cls, version: str, code: Path, base_url: str, where: Path, urls: list[str]) -> Worker:
        """`code` holds the `bot/` package to run: first on the path (the working directory of `-m` and the
        head of PYTHONPATH), this checkout after it for bench/ and tests/."""
        where.mkdir(parents=True, exist_ok=True)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.memory_before", "--worker", base_url, str(where), *urls,
            cwd=code, env={**os.environ, "PYTHONPATH": f"{code}{os.pathsep}{ROOT}"},
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )
        self = cls(version, proc)
        ready = await self.answer()
        if ready != f"READY {code.resolve() / 'bot'}":
            raise RuntimeError(f"the {version} process runs the wrong code or did not start: {ready!r}")
        return self

    async def answer(self) -> str:
        assert self.proc.stdout is not None
        while line := (await self.proc.stdout.readline()).decode():
            if line.startswith(MARK):
                return line[len(MARK):].strip()
        raise RuntimeError(f"the {self.version} process ended (exit {await self.proc.wait()})")

    async def turns(self, case: str, k: int) -> Batch:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{case} {k}\n".encode())
        await self.proc.stdin.drain()
        answer = json.loads(await self.answer())
        return Batch(answer["wall"], answer["cpu"])

    async def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


# --- the parent --------------------------------------------------------------------------------------------
def export(rev: str, where: Path) -> Path:
    """`bot/` as it was at `rev`, from this checkout's history; nothing else, so that the driver is today's."""
    out = where / f"code-{rev.replace('^', '-parent')}"
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "bot"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out


Batches = dict[tuple[str, str], list[Batch]]


async def interleave(workers: dict[str, Worker], n: int, rounds: int) -> Batches:
    per_round = max(1, n // rounds)
    pairs = [(version, case) for case in CASES for version in workers]
    for version, case in pairs:  # warm-up: connections, caches, compiled statements
        await workers[version].turns(case, max(3, per_round // 2))
    batches: Batches = {pair: [] for pair in pairs}
    for r in range(rounds):
        for version, case in pairs[r % len(pairs):] + pairs[: r % len(pairs)]:  # rotate who goes first
            batches[(version, case)].append(await workers[version].turns(case, per_round))
    return batches


async def measure(n: int, rounds: int, use_pg: bool, also: Sequence[str] = ()) -> dict[str, float]:
    header(f"12c. memory on, before recall by relevance ({BEFORE}) and now, benchmark 1's turn ({n} turns per variant)")
    out: dict[str, float] = {}
    with fake_llm(0.0) as base_url, workdir() as wd:
        code = {"before": export(BEFORE, wd), **{rev: export(rev, wd) for rev in also}, "now": ROOT}
        async with AsyncExitStack() as stack:
            databases = [("SQLite", {v: [sqlite_url(wd, f"{v}-{c}.db") for c in CASES] for v in code})]
            if use_pg and await pg_available():
                databases.append(("PostgreSQL", {v: [await stack.enter_async_context(pg_database()) for _ in CASES]
                                                 for v in code}))
            elif use_pg:
                print("PostgreSQL is not reachable: its variants are skipped")
            for name, urls in databases:
                started = await asyncio.gather(*(Worker.start(v, code[v], base_url, wd / f"{name}-{v}", urls[v])
                                                 for v in code))
                workers = {w.version: w for w in started}
                try:
                    out.update(report(name, await interleave(workers, n, rounds), list(code)))
                finally:
                    await asyncio.gather(*(w.close() for w in started))
    return out


def report(name: str, batches: Batches, versions: list[str]) -> dict[str, float]:
    """Per case and version: the median wall time of every turn and the median of the batches' CPU per turn;
    against before, their ratios and the spread of the rounds' ratios (each batch's median wall time)."""
    print(f"  {name}:")
    out: dict[str, float] = {}
    for case, what in (("empty", "no fact stored"), ("1k", "1,000 facts stored")):
        print(f"    ({case}) {what}:")
        before = batches[("before", case)]
        wall0 = median_ms([t for b in before for t in b.wall])
        cpu0 = median_ms([b.cpu for b in before])
        for version in versions:
            mine = batches[(version, case)]
            wall, cpu = median_ms([t for b in mine for t in b.wall]), median_ms([b.cpu for b in mine])
            line = f"      {version:10} wall {wall:6.2f} ms/turn   CPU {cpu:6.2f} ms/turn"
            if version != "before":
                rounds = [statistics.median(a.wall) / statistics.median(b.wall) for a, b in zip(mine, before,
                                                                                              strict=True)]
                line += (f"   /before: wall {wall / wall0:.3f}, CPU {cpu / cpu0:.3f}; per round ({len(rounds)}) "
                         f"median {statistics.median(rounds):.3f}, 10-90% {percentile(rounds, 10):.3f}-"
                         f"{percentile(rounds, 90):.3f}, min-max {min(rounds):.3f}-{max(rounds):.3f}")
                out[f"{name.lower()}_{case}_{version}/before"] = wall / wall0
            print(line)
        ratio = out[f"{name.lower()}_{case}_now/before"]
        print(f"      now/before = {ratio:.3f}   target <= {TARGET}   {verdict(ratio <= TARGET)}"
              f"   ({sum(len(b.wall) for b in before)} turns each)")
    return out


def main(argv: list[str] | None = None) -> dict[str, float]:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--worker"]:
        base_url, where, *urls = args[1:]
        bench_run(worker(base_url, Path(where), urls))
        return {}
    # --also REV (repeatable): the code at REV measured beside them, e.g. 2650ac3 (issue 39's own commit) to
    # tell its cost from the later changes'
    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--also", action="append", default=[])
    known, rest = extra.parse_known_args(argv)
    return turns_main(rest, "memory on: the turn before recall by relevance and now", 400,
                      partial(measure, also=known.also))


if __name__ == "__main__":
    main()
