"""Benchmark: alert webhooks answered while a storm arrives. `yokebot run` (its own process, SQLite or
PostgreSQL) gets 50 Alertmanager notifications for 50 different groups within one second, one every 20 ms,
on keep-alive connections (as Alertmanager sends), while it posts their roots to the fake Slack and runs the
investigations the storm limit allows (the scripted model answers after 300 ms). Measured per webhook, client
side: from the POST to the 200 (the body is committed by then). Target: p99 < 50 ms. Afterwards every group must
have its one root.

    .venv/bin/python -m bench.alerts [--groups 50 --seconds 1] [--pg]"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench._common import ROOT, free_port, header, percentile, pg_database, verdict, workdir
from tests.fakes.openai_server import FakeOpenAI, Step
from tests.fakes.slack_server import FakeSlack

TARGET_P99_MS = 50.0
TOKEN = "bench-webhook-token-0123"
PAYLOAD = json.loads((ROOT / "tests" / "alerts" / "payloads" / "alertmanager_firing.json").read_text())
AGENT = """---
description: on call
tools: [current_time]
alerts:
  - match: {severity: critical}
    post_to: "slack:#ops-alerts"
---
You are the on-call agent.
"""


def body(i: int) -> bytes:
    b = copy.deepcopy(PAYLOAD)
    b["groupKey"] = f'{{}}:{{alertname="Bench{i}"}}'
    b["groupLabels"]["alertname"] = b["commonLabels"]["alertname"] = f"Bench{i}"
    for a in b["alerts"]:
        a["labels"]["alertname"] = f"Bench{i}"
        a["fingerprint"] = f"{i:016x}"
    return json.dumps(b).encode()


async def storm(port: int, groups: int, seconds: float, first: int = 0) -> list[float]:
    gap = seconds / groups
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        async def one(i: int) -> float:
            await asyncio.sleep(i * gap)
            started = time.perf_counter()
            async with http.post(f"http://127.0.0.1:{port}/hooks/alertmanager", data=body(first + i),
                                 headers={"Authorization": f"Bearer {TOKEN}",
                                          "Content-Type": "application/json"}) as resp:
                await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"webhook {i} answered {resp.status}")
            return time.perf_counter() - started

        return list(await asyncio.gather(*(one(i) for i in range(groups))))


async def wait_for(predicate: Any, timeout: float, what: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise RuntimeError(f"yokebot exited while waiting for {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def up(port: int) -> bool:
    try:
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/healthz") as resp:
            return resp.status == 200
    except aiohttp.ClientError:
        return False


async def run(db_url: str, work: Path, groups: int, seconds: float) -> dict[str, float]:
    (work / "agents" / "ops").mkdir(parents=True, exist_ok=True)
    (work / "agents" / "ops" / "AGENT.md").write_text(AGENT)
    slack, llm = FakeSlack().start(), FakeOpenAI().start()
    llm.handler = lambda _: Step("reply", content="Looked into it.", delay=0.3)
    port = free_port()
    env = {**os.environ, "YOKEBOT_DATABASE_URL": db_url, "YOKEBOT_AGENTS_DIR": str(work / "agents"),
           "YOKEBOT_DEFAULT_AGENT": "ops", "OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "sk-bench-123456",
           "YOKEBOT_MODEL": "bench-model", "SLACK_BOT_TOKEN": "xoxb-bench", "SLACK_APP_TOKEN": "xapp-bench",
           "SLACK_API_URL": slack.api_url, "YOKEBOT_HTTP_PORT": str(port), "YOKEBOT_HTTP_HOST": "127.0.0.1",
           "YOKEBOT_SCHEDULER_ENABLED": "false", "YOKEBOT_WEBHOOK_TOKEN": TOKEN, "YOKEBOT_LOG_LEVEL": "WARNING"}
    with (work / "bot.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "bot", "run"], env=env, cwd=work, stdout=log,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not await up(port) or slack.connections < 1:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("yokebot run did not come up:\n" + (work / "bot.log").read_text()[-2000:])
            await asyncio.sleep(0.1)
        def roots() -> int:
            return len([c for c in slack.posts("C_OPS_ALERTS") if not c.params.get("thread_ts")])

        await storm(port, 3, 0.1, first=groups)  # warm-up: three groups (connections, the first INSERTs) ...
        await wait_for(lambda: roots() >= 3 and len(slack.calls_to("reactions.add")) >= 6, 60, "the warm-up", proc)
        await asyncio.sleep(1.0)  # ... whose investigations are over before the storm
        latencies = await storm(port, groups, seconds)

        try:
            await wait_for(lambda: roots() >= groups + 3, 120, "a root for every group", proc)
        except RuntimeError:
            print((work / "bot.log").read_text()[-3000:], "roots", roots())
            raise
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        slack.stop()
        llm.stop()
    ms = [x * 1000 for x in latencies]
    return {"p50": percentile(ms, 50), "p99": percentile(ms, 99), "max": max(ms), "roots": roots() - 3}


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--groups", type=int, default=50)
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--pg", action="store_true", help="also on PostgreSQL")
    args = p.parse_args(argv)
    header(f"alert webhooks: {args.groups} groups in {args.seconds:g} s")
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (a shared machine inflates these)")
    results: dict[str, dict[str, float]] = {}
    with workdir() as work:
        results["sqlite"] = asyncio.run(run(f"sqlite+aiosqlite:///{work / 'bench.db'}", work, args.groups,
                                            args.seconds))
    if args.pg:
        async def on_pg() -> dict[str, float]:
            async with pg_database() as url:
                with workdir() as work:
                    return await run(url, work, args.groups, args.seconds)

        results["postgresql"] = asyncio.run(on_pg())
    for name, r in results.items():
        print(f"{name:10s} webhook p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms, max {r['max']:.1f} ms; "
              f"{r['roots']:.0f}/{args.groups} roots posted  [{verdict(r['p99'] < TARGET_P99_MS)}: p99 < "
              f"{TARGET_P99_MS:.0f} ms]")
    return results


if __name__ == "__main__":
    main()
