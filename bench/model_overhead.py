"""Benchmark 7: per-call overhead of the model client against the length of the history.

One model call with 2, 20 and 80 history messages (user, assistant with tool calls, tool results) and 8
tool schemas, to the scripted server in its own process (zero latency), two ways with the same client:
  (a) `client.chat.completions.create(**body)`, as a user writes it: the SDK walks every message and tool
      schema through its TypedDict transform on each call;
  (b) yokebot's OpenAIChatModel.complete(ModelRequest(...)): a new request each call (as in a turn), its wire
      body built once and sent through the SDK's `client.post`.
Rounds alternate (a) and (b) so machine noise hits both alike. Printed per size: median wall time and CPU
time of this process per call (the server's CPU is not counted), the ratio b/a, and how the cost grows
from 2 to 80 messages (target: b flat, <= 1.2x)."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench._common import MODEL, fake_llm, header, verdict
from bot.engine.messages import Message, ToolCall
from bot.engine.model.client import OpenAIChatModel
from bot.engine.model.wire import ModelRequest

SIZES = (2, 20, 80)
TARGET_FLAT = 1.2


def tools(n: int = 8) -> tuple[dict[str, Any], ...]:
    return tuple({"type": "function", "function": {
        "name": f"tool_{i}", "description": f"Tool number {i}: reads something about the system and reports it.",
        "parameters": {"type": "object", "additionalProperties": False, "required": ["path"], "properties": {
            "path": {"type": "string", "description": "Where to look."},
            "lines": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50},
            "contains": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "since": {"type": "string", "description": "15m, 2h, 1d or a timestamp."}}}}} for i in range(n))


def history(n: int) -> tuple[Message, ...]:
    """n messages after the system message, ending with a user message: turns of user, assistant asking for a
    tool, the tool's result and the assistant's answer."""
    msgs: list[Message] = [Message.system("You are a benchmark agent. " * 20)]
    i = 0
    while len(msgs) - 1 < n - 1:
        kind = i % 4
        if kind == 0:
            msgs.append(Message.user(f"question {i}: what happened to nginx in the last hour? " * 3))
        elif kind == 1:
            msgs.append(Message.assistant("", (ToolCall(f"call_{i}", "tool_1", json.dumps({"path": "/var/log/x"})),)))
        elif kind == 2:
            msgs.append(Message.tool(f"call_{i - 1}", "tool_1", "2026-01-01 12:00:00 GET / 502\n" * 8))
        else:
            msgs.append(Message.assistant(f"answer {i}: nginx returned 502s from 12:00 to 12:05. " * 3))
        i += 1
    msgs.append(Message.user("and now?"))
    return tuple(msgs)


async def _time(call: Callable[[], Awaitable[Any]], calls: int) -> tuple[list[float], list[float]]:
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(calls):
        w, c = time.perf_counter(), time.process_time()
        await call()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return walls, cpus


async def run(base_url: str, calls: int, rounds: int) -> dict[int, dict[str, float]]:
    model = OpenAIChatModel(api_key="sk-bench", base_url=base_url, timeout=30)
    schemas = tools()
    results: dict[int, dict[str, float]] = {}
    try:
        for size in SIZES:
            msgs = history(size)
            body = ModelRequest(MODEL, msgs, schemas).payload  # the dicts a user of `create` holds

            async def via_create(body: dict[str, Any] = body) -> Any:
                return await model.client.chat.completions.create(**body)

            async def via_ours(msgs: tuple[Message, ...] = msgs) -> Any:
                return await model.complete(ModelRequest(MODEL, msgs, schemas))

            await via_create()
            await via_ours()
            samples: dict[str, list[float]] = {"a_wall": [], "a_cpu": [], "b_wall": [], "b_cpu": []}
            for _ in range(rounds):
                for key, fn in (("a", via_create), ("b", via_ours)):
                    walls, cpus = await _time(fn, calls)
                    samples[f"{key}_wall"] += walls
                    samples[f"{key}_cpu"] += cpus
            results[size] = {k: statistics.median(v) * 1000 for k, v in samples.items()}
    finally:
        await model.close()
    return results


def report(results: dict[int, dict[str, float]]) -> bool:
    header(f"7. model client per-call overhead against history length ({len(tools())} tools)")
    print("  messages   (a) create wall / cpu ms   (b) yokebot wall / cpu ms   b/a wall   b/a cpu")
    for size, r in results.items():
        print(f"  {size:>8}   {r['a_wall']:10.2f} / {r['a_cpu']:6.2f}      {r['b_wall']:10.2f} / {r['b_cpu']:6.2f}"
              f"       {r['b_wall'] / r['a_wall']:5.2f}     {r['b_cpu'] / r['a_cpu']:5.2f}")
    lo, hi = results[SIZES[0]], results[SIZES[-1]]
    grow_a, grow_b = hi["a_cpu"] / lo["a_cpu"], hi["b_cpu"] / lo["b_cpu"]
    print(f"  CPU per call, {SIZES[-1]} vs {SIZES[0]} messages: (a) create {grow_a:.2f}x, (b) yokebot {grow_b:.2f}x")
    ok = grow_b <= TARGET_FLAT
    print(f"  (b) growth {grow_b:.2f}x   target <= {TARGET_FLAT}   {verdict(ok)}")
    return ok


def main(argv: list[str] | None = None) -> bool:
    p = argparse.ArgumentParser(description="model client overhead against history length")
    p.add_argument("--quick", action="store_true", help="few calls (smoke run)")
    p.add_argument("--calls", type=int, default=20, help="calls per variant per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--no-pg", action="store_true", help="(no database here; accepted for `python -m bench`)")
    args = p.parse_args(argv)
    calls, rounds = (3, 2) if args.quick else (args.calls, args.rounds)
    with fake_llm() as url:
        results = asyncio.run(run(url, calls, rounds))
    return report(results)


if __name__ == "__main__":
    main()
