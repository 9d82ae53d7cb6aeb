"""Benchmark 6: live progress in Slack. After a mention, how long until the user sees text from the bot, and
how many Slack Web API calls one turn costs, with a model that takes 5 s to answer (`--seconds`: a fifth
before a tool call, then the answer written over the rest, streamed).

Variants, each over a few turns, interleaved in rounds (the same bot wiring as `yokebot run`, Socket Mode, the
real Bolt and slack_sdk against the fake Slack; the fake model streams):
  (a) baseline: progress off (`YOKEBOT_PROGRESS_LIVE=false`): :eyes:, then the whole answer;
  (b) progress on, a workspace with chat streaming (chat.startStream / appendStream / stopStream);
  (c) progress on, a workspace without it: the answer grows by chat.update.
Reported: time from the event's push to the first message text in the thread (the status, or the answer for
(a)), per variant (median) and as the ratio to (a); Web API calls per turn (max), against a bound of
3 (reactions) + 2 (status: post, final) + 1 per interval (edits) + 3 (answer) for a 5 s turn."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

from bench._common import bench_settings, header, registry, sqlite_url, verdict, workdir, write_bench_agent
from bot.app import build_app
from tests.fakes.openai_server import FakeOpenAI, Step, call
from tests.fakes.slack_server import BOT_USER, FakeSlack, event_callback
from tests.helpers import build_slack

CHANNEL = "C_BENCH"
TARGET_FIRST_TEXT_S = 1.0
ANSWER = ("The upstream 10.0.0.7 timed out three times since 10:00 (HTTP 502); it answers again since 10:07. "
          "Nothing else in the last hour. ") * 2


def script(llm: FakeOpenAI, turns: int, seconds: float) -> None:
    """A turn of `seconds`: a fifth of it before the tool call, the rest writing the answer."""
    chunks = len(range(0, len(ANSWER), 8))
    for i in range(turns):
        llm.script.append(Step("calls", calls=[call("echo", {"text": f"step {i}"})], delay=seconds / 5))
        llm.script.append(Step("reply", content=ANSWER, chunk_delay=seconds * 4 / 5 / chunks))


async def one_variant(name: str, base: Path, llm: FakeOpenAI, turns: int, seconds: float,
                      **settings: Any) -> dict[str, float]:
    fake = FakeSlack().start()
    fake.streaming = name != "c"
    app = await build_app(bench_settings(sqlite_url(base, f"{name}.db"), llm.base_url, write_bench_agent(base),
                                         slack_bot_token="xoxb-bench", slack_app_token="xapp-bench",
                                         slack_api_url=fake.api_url, model_stream=True, **settings),
                          registry=registry())
    adapter = build_slack(app)
    assert adapter is not None
    firsts: list[float] = []
    calls: list[int] = []
    try:
        await adapter.start()
        while fake.connections == 0:
            await asyncio.sleep(0.01)
        script(llm, turns, seconds)
        for i in range(turns):
            ts = f"1700000{i:03d}.000100"
            before = len(fake.calls)
            event = {"type": "app_mention", "user": "U_ALICE", "text": f"<@{BOT_USER}> how is nginx?", "ts": ts,
                     "channel": CHANNEL, "event_ts": ts}
            pushed = time.perf_counter()
            fake.push(event_callback(event))
            first = await wait_for(lambda ts=ts: bool(fake.posts(CHANNEL, thread_ts=ts)
                                                      or fake.calls_to("chat.startStream")[len(firsts):]))
            firsts.append(first - pushed)
            await wait_for(lambda ts=ts: ("reactions.add", "white_check_mark") in fake.reactions(ts), timeout=30)
            await asyncio.sleep(0.2)  # the status message's last word
            calls.append(len([c for c in fake.calls[before:] if c.method.startswith(("chat.", "reactions."))]))
    finally:
        await adapter.stop()
        await app.close()
        fake.stop()
    return {"first_s": statistics.median(firsts), "calls_max": float(max(calls)),
            "calls_median": statistics.median(calls)}


async def wait_for(predicate: Any, timeout: float = 15.0) -> float:
    deadline = time.perf_counter() + timeout
    while not predicate():
        if time.perf_counter() > deadline:
            raise TimeoutError("the benchmark turn did not get that far")
        await asyncio.sleep(0.005)
    return time.perf_counter()


def call_bound(turn_seconds: float, interval: float) -> int:
    return 3 + 2 + int(turn_seconds / interval) + 1 + 3


async def run(turns: int, rounds: int, seconds: float) -> dict[str, dict[str, float]]:
    llm = FakeOpenAI().start()
    results: dict[str, list[dict[str, float]]] = {"a": [], "b": [], "c": []}
    try:
        with workdir() as base:
            for r in range(rounds):
                for name in ("a", "b", "c")[r % 3:] + ("a", "b", "c")[:r % 3]:
                    live = {"progress_live": name != "a"}
                    results[name].append(await one_variant(f"{name}{r}", base / f"{name}{r}", llm, turns, seconds,
                                                               **live))
    finally:
        llm.stop()
    return {k: {m: statistics.median(x[m] for x in v) if m != "calls_max" else max(x[m] for x in v)
                for m in v[0]} for k, v in results.items()}


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seconds", type=float, default=5.0, help="how long the model takes over a turn")
    p.add_argument("--quick", action="store_true", help="one turn of 2 s, one round")
    p.add_argument("--no-pg", action="store_true", help="accepted for `python -m bench` (SQLite only here)")
    args = p.parse_args(argv)
    turns, rounds, seconds = (1, 1, 2.0) if args.quick else (args.turns, args.rounds, args.seconds)
    header(f"6. live progress in Slack: a {seconds:g} s turn, {turns} turn(s) x {rounds} round(s) per variant")
    res = run_sync(turns, rounds, seconds)
    base = res["a"]["first_s"]
    bound = call_bound(seconds, 1.0)
    labels = {"a": "(a) progress off", "b": "(b) streaming", "c": "(c) edits (no streaming methods)"}
    for k, r in res.items():
        print(f"{labels[k]:34} first text after {r['first_s'] * 1000:7.0f} ms ({r['first_s'] / base:.2f} x a); "
              f"Web API calls per turn: median {r['calls_median']:.0f}, max {r['calls_max']:.0f}")
    ok_first = all(res[k]["first_s"] < TARGET_FIRST_TEXT_S for k in ("b", "c"))
    ok_calls = all(res[k]["calls_max"] <= bound for k in ("b", "c"))
    print(f"first visible text < {TARGET_FIRST_TEXT_S:.0f} s with progress: {verdict(ok_first)}; "
          f"calls per turn <= {bound}: {verdict(ok_calls)}")
    return res


def run_sync(turns: int, rounds: int, seconds: float = 5.0) -> dict[str, dict[str, float]]:
    return asyncio.run(run(turns, rounds, seconds))


if __name__ == "__main__":
    main()
