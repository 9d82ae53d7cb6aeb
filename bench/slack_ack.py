"""Benchmark 5: Slack acknowledgement latency. The fake Slack, in a process of its own, sends a burst of 200
events at once, as Socket Mode envelopes and (second variant) as signed HTTP POSTs to /slack/events, and
records per event the time from its send to its ack (`{"envelope_id"}` back on the websocket; HTTP: the 200).
For HTTP the same burst first goes to an aiohttp handler that only answers 200: the floor of this machine
and run (aiohttp, asyncio, the sender), printed as the baseline of the HTTP figures.
The model (also its own process) answers after 300 ms per call, so the acks must not wait for the turns.

The bot is wired as `yokebot run` wires it (build_app, the Slack adapter with the durable inbox, an aiohttp
server for HTTP mode), with the benchmark agent; each event's inbox claim (its row, stored before the ack) is
timed on the way through, to tell the database's share of the ack time from Bolt's and the loop's.
After the burst it waits until every event got its answer in Slack, once: acks must not lose the work."""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from bench._common import (
    StallMeter,
    bench_settings,
    child_server,
    fake_llm,
    header,
    percentile,
    pg_available,
    pg_database,
    ready,
    registry,
    sqlite_url,
    verdict,
    workdir,
    write_bench_agent,
)
from bench._common import (
    run as bench_run,
)
from bot.app import App, build_app
from bot.chat.slack.adapter import EVENTS_PATH, SlackAdapter
from tests.fakes.slack_server import BOT_USER, event_callback
from tests.helpers import build_slack

TARGET_P99_MS = 50.0
SECRET = "bench-signing-secret"
CHANNEL = "C_BENCH"
WARMUP = 5


# --- the fake Slack, in its own process -----------------------------------------------------------------
class FakeSlackProcess:
    """`python -m tests.fakes.slack_server`, driven over its stdin/stdout (one JSON line each way)."""

    def __init__(self, proc: subprocess.Popen[str], api_url: str) -> None:
        self.proc, self.api_url = proc, api_url

    def _request(self, op: str, **args: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op, "args": args}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        if "error" in reply:
            raise RuntimeError(f"the fake Slack failed {op}: {reply['error']}")
        return reply["result"]

    async def request(self, op: str, **args: Any) -> Any:
        # in a thread: the bot under test shares this event loop and must keep running while we wait
        return await asyncio.to_thread(self._request, op, **args)


@contextmanager
def fake_slack_process() -> Iterator[FakeSlackProcess]:
    with child_server("tests.fakes.slack_server", what="the fake Slack") as (proc, url):
        yield FakeSlackProcess(proc, url)


# --- the bot under test ---------------------------------------------------------------------------------
class TimedClaims:
    """The inbox's `claim` (the event's row, written before the ack), timed on the way through: how much of
    each ack is the exactly-once database write."""

    def __init__(self, inbox: Any) -> None:
        self.inner = inbox.claim
        self.seconds: list[float] = []
        inbox.claim = self.claim  # the adapter's exactly-once step calls it by name

    async def claim(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return await self.inner(*args, **kwargs)
        finally:
            self.seconds.append(time.perf_counter() - start)


@dataclass
class Bot:
    app: App
    adapter: SlackAdapter
    claims: TimedClaims
    events_url: str = ""


async def serve(stack: AsyncExitStack, http: web.Application) -> str:
    """Serve `http` on a free port until `stack` closes; the URL of its events path."""
    runner = web.AppRunner(http)
    await runner.setup()
    stack.push_async_callback(runner.cleanup)
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return f"http://127.0.0.1:{port}{EVENTS_PATH}"


async def start_bot(stack: AsyncExitStack, mode: str, db_url: str, llm_url: str, slack_url: str, wd: Path,
                    overrides: dict[str, Any]) -> Bot:
    tokens: dict[str, Any] = {"slack_bot_token": "xoxb-bench-token", "slack_api_url": slack_url}
    tokens["slack_app_token" if mode == "socket" else "slack_signing_secret"] = \
        "xapp-bench-token" if mode == "socket" else SECRET
    # one message per answer (no live status message), so that "answered once" can be counted in posts
    settings = bench_settings(db_url, llm_url, write_bench_agent(wd), **tokens,
                              **{"progress_live": False, **overrides})
    app = await build_app(settings, registry=registry())
    stack.push_async_callback(app.close)
    client = getattr(app.model, "client", None)
    if client is not None:  # App.close() leaves the SDK client to the garbage collector
        stack.push_async_callback(client.close)
    adapter = build_slack(app)  # as `yokebot run` builds it: the exactly-once step is the durable inbox's
    assert adapter is not None and app.inbox_turns is not None
    claims = TimedClaims(app.inbox_turns.inbox)
    bot = Bot(app, adapter, claims)
    if mode == "http":  # served the way bot/runner.py serves it: an aiohttp app, a TCPSite with its defaults
        http = web.Application()
        adapter.mount(http)
        bot.events_url = await serve(stack, http)
    await adapter.start()
    stack.push_async_callback(adapter.stop)
    await ready(app)
    return bot


# --- the burst --------------------------------------------------------------------------------------------
_counter = iter(range(1, 10**9))


def mentions(n: int) -> list[dict[str, Any]]:
    """n mentions, each a new message (a new thread, so a new session) with its own event_id."""
    out = []
    for _ in range(n):
        k = next(_counter)
        ts = f"{1_800_000_000 + k}.{k:06d}"
        event = {"type": "app_mention", "user": f"U{k:07d}", "text": f"<@{BOT_USER}> run the two echoes",
                 "ts": ts, "channel": CHANNEL, "event_ts": ts}
        out.append(event_callback(event, f"EvBENCH{k:08d}"))
    return out


async def send(fake: FakeSlackProcess, bot: Bot, mode: str, n: int) -> list[float]:
    """Send n events at once; per event, seconds to its ack. Raises when one is not acknowledged."""
    payloads = mentions(n)
    if mode == "socket":
        times = await fake.request("push_burst", payloads=payloads)
        missing = sum(1 for t in times if t is None)
    else:
        results = await fake.request("post_burst", url=bot.events_url, secret=SECRET, payloads=payloads)
        times = [t for _status, t in results]
        missing = sum(1 for status, _t in results if status != 200)
    if missing:
        raise RuntimeError(f"{missing} of {n} events were not acknowledged")
    return times


async def answered(fake: FakeSlackProcess, expected: int, timeout: float) -> float:
    """Wait until Slack got `expected` answers in all; returns the seconds it took. More is a failure too."""
    start = time.perf_counter()
    while (posts := await fake.request("count", method="chat.postMessage")) < expected:
        if time.perf_counter() - start > timeout:
            raise RuntimeError(f"only {posts} of {expected} events were answered after {timeout:.0f} s")
        await asyncio.sleep(0.1)
    if posts > expected:
        raise RuntimeError(f"{posts} answers for {expected} events: some event was processed twice")
    return time.perf_counter() - start


@dataclass
class Result:
    acks_ms: list[float]
    claims_ms: list[float]
    stall_ms: float
    answered_s: float

    def summary(self) -> dict[str, float]:
        return {"p50": percentile(self.acks_ms, 50), "p99": percentile(self.acks_ms, 99),
                "max": max(self.acks_ms), "claim_p50": percentile(self.claims_ms, 50),
                "claim_p99": percentile(self.claims_ms, 99), "stall": self.stall_ms, "answered_s": self.answered_s}


@dataclass(frozen=True)
class Plan:
    n: int
    latency: float
    overrides: dict[str, Any]


async def database(stack: AsyncExitStack, backend: str, wd: Path) -> str | None:
    if backend != "postgresql":
        return sqlite_url(wd, f"slack-{next(_counter)}.db")
    if not await pg_available():
        print("  PostgreSQL is not reachable: skipped")
        return None
    return await stack.enter_async_context(pg_database())


async def variant(fake: FakeSlackProcess, llm_url: str, wd: Path, mode: str, backend: str,
                  plan: Plan) -> Result | None:
    async with AsyncExitStack() as stack:
        db_url = await database(stack, backend, wd)
        if db_url is None:
            return None
        connections = await fake.request("connections")
        bot = await start_bot(stack, mode, db_url, llm_url, fake.api_url, wd, plan.overrides)
        while mode == "socket" and await fake.request("connections") <= connections:
            await asyncio.sleep(0.02)
        posts = await fake.request("count", method="chat.postMessage")
        await send(fake, bot, mode, WARMUP)  # connections, compiled statements, Bolt's first request
        await answered(fake, posts + WARMUP, timeout=30)
        bot.claims.seconds.clear()
        with StallMeter() as meter:
            await asyncio.sleep(0.05)  # the ticker is running before the burst
            acks = await send(fake, bot, mode, plan.n)
            stall = meter.max_late
        slots = bot.app.settings.slack_max_concurrent_turns
        took = await answered(fake, posts + WARMUP + plan.n, timeout=30 + plan.n * 3 * plan.latency / slots * 2)
        return Result([t * 1000 for t in acks], [t * 1000 for t in bot.claims.seconds], stall * 1000, took)


async def http_floor(fake: FakeSlackProcess, n: int) -> dict[str, float]:
    """The same HTTP burst against an aiohttp server whose handler reads the body and answers 200 at once: what
    aiohttp, asyncio and the sender cost on this machine in this run, with no bot at all (the baseline)."""

    async def empty(request: web.Request) -> web.Response:
        await request.read()
        return web.Response()

    http = web.Application()
    http.router.add_post(EVENTS_PATH, empty)
    async with AsyncExitStack() as stack:
        url = await serve(stack, http)
        await fake.request("post_burst", url=url, secret=SECRET, payloads=mentions(WARMUP))
        results = await fake.request("post_burst", url=url, secret=SECRET, payloads=mentions(n))
    acks = [t * 1000 for _status, t in results]
    return {"p50": percentile(acks, 50), "p99": percentile(acks, 99), "max": max(acks)}


def report(label: str, r: Result, n: int) -> None:
    s = r.summary()
    print(f"  {label:20} ack p50 {s['p50']:6.1f} ms, p99 {s['p99']:6.1f} ms, max {s['max']:6.1f} ms "
          f"[target p99 < {TARGET_P99_MS:.0f} ms: {verdict(s['p99'] < TARGET_P99_MS)}]")
    print(f"  {'':20} inbox claim p50 {s['claim_p50']:5.1f} ms, p99 {s['claim_p99']:5.1f} ms; "
          f"longest loop stall {s['stall']:5.1f} ms; all {n} answered, once each, {s['answered_s']:.1f} s later")


async def run(plan: Plan, modes: list[str], backends: list[str]) -> dict[str, dict[str, float]]:
    slots = plan.overrides.get("slack_max_concurrent_turns", "default")
    header(f"5. Slack ack latency: a burst of {plan.n} events, model {plan.latency * 1000:.0f} ms per call, "
           f"turn slots {slots}")
    out: dict[str, dict[str, float]] = {}
    with fake_llm(plan.latency) as llm_url, fake_slack_process() as fake, workdir() as wd:
        if "http" in modes:
            floor = out["http/floor"] = await http_floor(fake, plan.n)
            print(f"  {'http/floor':20} ack p50 {floor['p50']:6.1f} ms, p99 {floor['p99']:6.1f} ms, max "
                  f"{floor['max']:6.1f} ms (baseline: an aiohttp handler that only answers 200, no bot)")
        for backend in backends:
            for mode in modes:
                r = await variant(fake, llm_url, wd, mode, backend, plan)
                if r is not None:
                    report(f"{mode}/{backend}", r, plan.n)
                    out[f"{mode}/{backend}"] = r.summary()
    return out


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    p = argparse.ArgumentParser(description="Benchmark 5: Slack acknowledgement latency")
    p.add_argument("--quick", action="store_true", help="a burst of 20, 50 ms model latency, SQLite only")
    p.add_argument("--events", type=int, default=200)
    p.add_argument("--latency", type=float, default=None, help="model latency per call, seconds (0.3)")
    p.add_argument("--slots", type=int, default=None, help="YOKEBOT_SLACK_MAX_CONCURRENT_TURNS (default: its default)")
    p.add_argument("--mode", choices=["socket", "http"], action="append", help="repeatable; default both")
    p.add_argument("--no-pg", action="store_true", help="skip PostgreSQL")
    args = p.parse_args(argv)
    latency = args.latency if args.latency is not None else 0.05 if args.quick else 0.3
    plan = Plan(20 if args.quick else args.events, latency,
                {} if args.slots is None else {"slack_max_concurrent_turns": args.slots})
    backends = ["sqlite"] if args.quick or args.no_pg else ["sqlite", "postgresql"]
    return bench_run(run(plan, args.mode or ["socket", "http"], backends))


if __name__ == "__main__":
    main()
