"""Benchmark: Teams acknowledgement latency. A burst of signed activities (real RS256 JWTs, as the Bot Connector
sends them) is POSTed at once to `/teams/messages`, from the fake Teams' own thread and event loop, and each
request's time from send to its 200 is recorded. Three servers take the same burst, on the same loop:

- floor: an aiohttp handler that reads the body and answers 200 (this machine's and run's aiohttp + asyncio);
- auth: the same, after yokebot's token check (`InboundAuth`: signature, issuer, audience, expiry, serviceurl);
- yokebot: the Teams adapter as `yokebot run` wires it (the check, then the activity stored in the durable inbox
  with its claim before the 200; the turn runs after, against a model answering in `--latency` seconds).

Ratios are against the floor. After the burst it waits until every activity got its answer, once."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bench._common import (
    bench_settings,
    fake_llm,
    free_port,
    header,
    percentile,
    ready,
    registry,
    verdict,
    workdir,
    write_bench_agent,
)
from bench._common import run as bench_run
from bench._common import sqlite_url as sqlite_at
from bot.app import App, build_app
from bot.chat.teams.auth import InboundAuth, bearer
from tests.chat.teams_harness import teams_bot

Handler = Callable[[web.Request], Awaitable[web.Response]]


async def serve(handler: Handler) -> tuple[web.AppRunner, str]:
    http = web.Application()
    http.router.add_post("/teams/messages", handler)
    runner = web.AppRunner(http)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"http://127.0.0.1:{port}/teams/messages"


async def burst(endpoint: str, bodies: list[tuple[str, bytes]]) -> list[float]:
    """Every request at once; each one's seconds from send to its (200) answer."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        async def one(token: str, body: bytes) -> float:
            start = time.perf_counter()
            async with http.post(endpoint, data=body, headers={"Authorization": f"Bearer {token}",
                                                               "Content-Type": "application/json"}) as resp:
                await resp.read()
                assert resp.status == 200, resp.status
            return time.perf_counter() - start

        return list(await asyncio.gather(*(one(t, b) for t, b in bodies)))


def report(name: str, times: list[float], floor: list[float] | None) -> dict[str, float]:
    p50, p99 = percentile(times, 50) * 1000, percentile(times, 99) * 1000
    line = f"{name:<8} ack p50 {p50:7.1f} ms   p99 {p99:7.1f} ms"
    if floor is not None:
        line += f"   (x{p50 / (percentile(floor, 50) * 1000):.2f} / x{p99 / (percentile(floor, 99) * 1000):.2f} " \
                "of the floor)"
    print(line, flush=True)
    return {"p50_ms": p50, "p99_ms": p99}


async def measure(events: int, latency: float, base: Path) -> dict[str, dict[str, float]]:
    from tests.fakes.teams import FakeTeams

    fake = FakeTeams().start()
    try:
        with fake_llm(latency) as llm_url:
            app = await build_app(bench_settings(sqlite_at(base), llm_url, write_bench_agent(base),
                                                 progress_live=False, **fake.settings()), registry=registry())
            try:
                await ready(app)
                return await _measure(app, fake, events)
            finally:
                await app.close()
    finally:
        fake.stop()


async def _measure(app: App, fake: Any, events: int) -> dict[str, dict[str, float]]:
    activities = [fake.activity(f"question {i}", kind="personal" if i % 2 else "channel") for i in range(events)]
    bodies = [(fake.token(a), json.dumps(a).encode()) for a in activities]
    results: dict[str, dict[str, float]] = {}
    session = aiohttp.ClientSession()
    auth = InboundAuth(app.settings, lambda: session)

    async def floor_handler(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=200)

    async def auth_handler(request: web.Request) -> web.Response:
        claims, key = await auth.verify(bearer(request.headers.get("Authorization")) or "")
        InboundAuth.check_activity(claims, key, json.loads(await request.read()))
        return web.Response(status=200)

    try:
        floor: list[float] | None = None
        for name, handler in (("floor", floor_handler), ("auth", auth_handler)):
            runner, endpoint = await serve(handler)
            try:
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(burst(endpoint, bodies),
                                                                           fake.server.loop))  # warm up
                times = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(burst(endpoint, bodies),
                                                                                   fake.server.loop))
            finally:
                await runner.cleanup()
            results[name] = report(name, times, floor)
            floor = floor or times
        async with teams_bot(app) as (_adapter, endpoint):
            times = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(burst(endpoint, bodies),
                                                                               fake.server.loop))
            results["yokebot"] = report("yokebot", times, floor)
            deadline = time.monotonic() + 120
            while sum(1 for s in fake.sent if s.activity.get("type") == "message") < events:
                if time.monotonic() > deadline:
                    raise AssertionError("not every activity was answered")
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
            answers = [s for s in fake.sent if s.activity.get("type") == "message"]
            once = len(answers) == events
            print(f"answered: {len(answers)} of {events}, each once: {verdict(once)}", flush=True)
            assert once, "an activity was answered twice"
    finally:
        await session.close()
    return results


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    p = argparse.ArgumentParser(description="Teams acknowledgement latency")
    p.add_argument("--quick", action="store_true", help="a burst of 20, 50 ms model latency")
    p.add_argument("--events", type=int, default=200)
    p.add_argument("--latency", type=float, default=None, help="model latency per call, seconds (0.3)")
    args = p.parse_args(argv)
    events = 20 if args.quick else args.events
    latency = args.latency if args.latency is not None else 0.05 if args.quick else 0.3
    header(f"Teams: ack latency of a burst of {events} signed activities")
    with workdir() as base:
        return bench_run(measure(events, latency, base))


if __name__ == "__main__":
    main()
