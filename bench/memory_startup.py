"""Benchmarks 4 and 6: start-up time and resident memory.

6. `yokebot run` is started as a subprocess (temp SQLite database, the shipped agents, the fake model,
   a free HTTP port) and /healthz is polled: time from spawn to ready, on a fresh database (migrations run)
   and on an existing one, next to a bare `python -c pass` for scale. Then SIGTERM must stop it cleanly.
4. Idle RSS of that `yokebot run` process. Then, in a child process built the way `yokebot run` builds
   the app (build_app from Settings), 5 x 1,000 turns across 5 x 1,000 new sessions: RSS after each
   thousand; what the last thousand adds, per session, is the per-session growth (should be ~0). Why the
   fifth: the bounded caches fill first (the recent sessions and their `updated_at` touches, 4,096 entries
   each; the token counts of 8,192 messages), so the first thousands grow by design (about 6, 2, 0.8 KB
   per session), and only growth after them would be a leak."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench._common import (
    ROOT,
    USER_TEXT,
    bench_app,
    fake_llm,
    free_port,
    header,
    rss_mb,
    sqlite_url,
    verdict,
    workdir,
)

TARGET_IDLE_MB = 150.0
TARGET_GROWTH_KB = 2.0  # per finished session, over the last thousand: allocator noise, not retention
BATCHES = 5  # thousands of sessions; the bounded caches are full after about four


def run_env(db_url: str, base_url: str, port: int) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "DISCORD_", "YOKEBOT_", "OPENAI_"))
    }
    env.update(
        YOKEBOT_DATABASE_URL=db_url,
        YOKEBOT_AGENTS_DIR=str(ROOT / "agents"),
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="sk-bench-key-123",
        YOKEBOT_HTTP_PORT=str(port),
        YOKEBOT_LOG_LEVEL="WARNING",
    )
    return env


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def start_run(db_url: str, base_url: str, cwd: Path) -> tuple[subprocess.Popen[bytes], float, int]:
    port = free_port()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "run"],
        cwd=cwd,
        env=run_env(db_url, base_url, port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    while not healthy(port):
        if proc.poll() is not None:
            stderr = proc.stderr.read().decode() if proc.stderr else ""
            raise RuntimeError(f"yokebot run exited with {proc.returncode}: {stderr[-2000:]}")
        if time.perf_counter() - started > 60:
            proc.kill()
            raise RuntimeError("yokebot run was not ready within 60 s")
        time.sleep(0.01)
    return proc, time.perf_counter() - started, port


def stop_run(proc: subprocess.Popen[bytes]) -> tuple[int, float]:
    started = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    return code, time.perf_counter() - started


def python_baseline(runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def startup_and_idle(runs: int) -> dict[str, float]:
    header("6. start-up: `yokebot run` to ready (/healthz answers)")
    out: dict[str, float] = {}
    with fake_llm() as base_url, workdir() as wd:
        fresh, existing, idle, codes = [], [], [], []
        for i in range(runs):
            url = sqlite_url(wd, f"run{i}.db")
            proc, secs, _ = start_run(url, base_url, wd)  # fresh database: migrations run
            fresh.append(secs)
            codes.append(stop_run(proc)[0])
            proc, secs, _ = start_run(url, base_url, wd)
            existing.append(secs)
            time.sleep(1.0)
            idle.append(rss_mb(proc.pid))
            code, stop_s = stop_run(proc)
            codes.append(code)
            out["stop_s"] = max(out.get("stop_s", 0.0), stop_s)
        base = python_baseline(runs)
    out.update(
        fresh_s=statistics.median(fresh),
        existing_s=statistics.median(existing),
        python_s=base,
        idle_mb=statistics.median(idle),
    )
    print(
        f"  fresh database (migrations run): {out['fresh_s']:.2f} s;  "
        f"existing database: {out['existing_s']:.2f} s"
        f"  (median of {runs}; a bare `python -c pass` takes {base:.2f} s here: "
        f"{out['existing_s'] / base:.0f}x)"
    )
    print(f"  SIGTERM: exit codes {sorted(set(codes))}, slowest stop {out['stop_s']:.2f} s")
    header("4. memory")
    print(
        f"  idle RSS of `yokebot run`: {out['idle_mb']:.0f} MB   "
        f"[target < {TARGET_IDLE_MB:.0f} MB: {verdict(out['idle_mb'] < TARGET_IDLE_MB)}]"
    )
    return out


# --- turns in a child process -------------------------------------------------------------------------------
async def child(base_url: str, db_url: str, per_batch: int, concurrency: int) -> dict[str, Any]:
    from bot.engine.service import TurnRequest

    wd = Path(db_url.split("///", 1)[1]).parent
    async with bench_app(db_url, base_url, wd) as app:
        gate = asyncio.Semaphore(concurrency)

        async def turn(i: int) -> None:
            async with gate:
                req = TurnRequest(
                    platform="bench",
                    channel="c1",
                    thread=f"mem-{i}",
                    text=USER_TEXT,
                    agent="bench",
                    trigger="mention",
                    user="u1",
                )
                result = await app.service.handle(req)
                if result.iterations != 3 or result.error:
                    raise RuntimeError(f"unexpected turn: {result}")

        await asyncio.gather(*(turn(-i - 1) for i in range(20)))  # warm-up
        gc.collect()
        rss = [rss_mb()]
        for batch in range(BATCHES):
            await asyncio.gather(*(turn(batch * per_batch + i) for i in range(per_batch)))
            gc.collect()
            rss.append(rss_mb())
        return {"rss": rss, "locks_left": len(app.service.locks)}


def turns_in_child(per_batch: int, concurrency: int) -> dict[str, Any]:
    with fake_llm() as base_url, workdir() as wd:
        code = (
            "import asyncio, json, sys; from bench.memory_startup import child; "
            "print(json.dumps(asyncio.run(child(*sys.argv[1:3], int(sys.argv[3]), int(sys.argv[4])))))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, base_url, sqlite_url(wd), str(per_batch), str(concurrency)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the memory child failed: {done.stderr[-3000:]}")
        out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    rss: list[float] = out["rss"]
    growth_kb = (rss[-1] - rss[-2]) * 1024 / per_batch
    out["growth_kb_per_session"] = growth_kb
    ok = growth_kb <= TARGET_GROWTH_KB and out["locks_left"] == 0
    steps = ", ".join(f"{r:.1f}" for r in rss[1:])
    print(f"  app process: RSS {rss[0]:.0f} MB after start-up; after each {per_batch} turns in {per_batch} new "
          f"sessions: {steps} MB; per-session locks left: {out['locks_left']}")
    print(
        f"  growth over the last {per_batch} sessions (the caches full): {growth_kb:.2f} KB/session   "
        f"[target ~0, <= {TARGET_GROWTH_KB} KB: {verdict(ok)}]"
    )
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description="Benchmarks 4 and 6: memory and start-up")
    p.add_argument("--quick", action="store_true", help="one start-up, 200 turns per batch")
    args = p.parse_args(argv)
    out: dict[str, Any] = startup_and_idle(1 if args.quick else 3)
    out["turns"] = turns_in_child(200 if args.quick else 1000, 20)
    return out


if __name__ == "__main__":
    main()
