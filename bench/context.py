"""Benchmark 7: prompt tokens per turn over a long thread, and what counting tokens costs per call.

(a) A thread of N turns (default 200); each turn one tool call returning 10,000 characters, then an answer.
    The model server counts every prompt with its own tokenizer and refuses one over its 8,192-token window
    with OpenAI's HTTP 400. Two runs in the same process: "before" = the engine as it was (history by turns
    only: a window it never hits, so nothing is shortened or compacted) against a server without a window;
    "after" = the profile's real window, fitting and compaction. Prints the server's count of the first
    prompt of chosen turns, the compaction calls, and refusals.
(b) Counting a 20-message prompt: json.dumps of the messages (the cheapest thing a counter could do, as the
    baseline), our estimate on messages never seen, the same messages again (cached), and the real
    tokenizer (bpe-openai) cold and cached, in microseconds per call and as ratios to the baseline.

    .venv/bin/python -m bench.context [--turns 200] [--quick]"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bot.app import build_app  # noqa: E402
from bot.engine.context.tokens import TokenCounter, exact_counter  # noqa: E402
from bot.engine.messages import Message, ToolCall  # noqa: E402
from bot.engine.model.wire import to_wire  # noqa: E402
from bot.engine.run.context import ToolContext  # noqa: E402
from bot.engine.run.tooling import tool  # noqa: E402
from bot.engine.service import TurnRequest  # noqa: E402
from tests.conftest import make_settings  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Step, call  # noqa: E402
from tests.helpers import registry, write_agent  # noqa: E402

WINDOW = 8192
RESULT_CHARS = 10_000
SHOW = (1, 2, 5, 10, 20, 30, 50, 100, 150, 200)


@tool("dump", "Return a large block of log output.")
async def dump(ctx: ToolContext, part: int = 0) -> str:
    line = f"2026-11-30T10:00:00Z part={part} upstream=10.0.0.7 status=502 request_id=abcdef0123456789\n"
    return (line * (RESULT_CHARS // len(line) + 1))[:RESULT_CHARS]


def _compaction(body: dict[str, Any]) -> bool:
    return "tools" not in body and body["messages"][0]["content"].startswith("You keep the memory")


def _model(body: dict[str, Any]) -> Step:
    if _compaction(body):
        return Step("reply", content="Summary: numbered questions; each dump showed 502s from 10.0.0.7. " * 3)
    last = body["messages"][-1]
    if last["role"] == "user":
        return Step("calls", calls=[call("dump", {"part": len(body["messages"])})])
    return Step("reply", content="The dump shows 502s from upstream 10.0.0.7.")


async def _thread(turns: int, window: int | None, tmp: Path) -> dict[str, Any]:
    llm = FakeOpenAI().start()
    llm.handler = _model
    if window:
        llm.enforce_window(window)
    agents = tmp / f"agents-{window}"
    profile_window = window or 1_000_000
    write_agent(agents, "long", f"tools: [dump]\nmax_iterations: 4\ncontext_window: {profile_window}")
    app = await build_app(make_settings(f"sqlite+aiosqlite:///{tmp / f'ctx-{window}.db'}", llm, agents,
                                        default_agent="long"), registry={**registry(), "dump": dump})
    firsts: list[int] = []
    errors = 0
    started = time.perf_counter()
    try:
        for n in range(1, turns + 1):
            before = len(llm.requests)
            result = await app.service.handle(TurnRequest("console", "local", "t", f"question {n}", "long"))
            errors += result.error is not None
            counts = [c for b, c in zip(llm.requests[before:], llm.prompt_tokens[before:], strict=True)
                      if not _compaction(b)]
            firsts.append(counts[0] if counts else 0)
    finally:
        await app.close()
        llm.stop()
    return {"firsts": firsts, "errors": errors, "refused": llm.refused, "seconds": time.perf_counter() - started,
            "compactions": sum(1 for b in llm.requests if _compaction(b)), "max": max(llm.prompt_tokens)}


def _prompt(tag: str) -> list[Message]:
    msgs: list[Message] = [Message.system(f"You are an ops agent {tag}. " * 40)]
    for i in range(6):
        c = ToolCall(f"c{tag}{i}", "tail_log", json.dumps({"path": "/var/log/nginx/error.log", "lines": 50}))
        msgs += [Message.user(f"{tag} what happened at {i}?"), Message.assistant("", (c,)),
                 Message.tool(c.id, "tail_log", f"{tag} 502 upstream error line {i}\n" * 60)]
    return msgs[:20]


def _per_call(fn: Any, prompts: list[list[Message]]) -> float:
    started = time.perf_counter()
    for p in prompts:
        fn(p)
    return (time.perf_counter() - started) / len(prompts) * 1e6


def counting(rounds: int) -> dict[str, float]:
    fresh = [_prompt(str(i)) for i in range(rounds)]
    again = [fresh[0]] * rounds
    out: dict[str, float] = {}
    out["json.dumps (baseline)"] = _per_call(lambda p: len(json.dumps([to_wire(m) for m in p])) // 4, fresh)
    est = TokenCounter("llama3.1:8b")
    out["estimate, new messages"] = _per_call(est.messages, fresh)
    out["estimate, cached"] = _per_call(est.messages, again)
    if exact_counter("gpt-4o") is not None:
        real = TokenCounter("gpt-4o")
        out["bpe-openai o200k, new messages"] = _per_call(real.messages, [_prompt(f"x{i}") for i in range(rounds)])
        out["bpe-openai o200k, cached"] = _per_call(real.messages, again)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=200)
    p.add_argument("--quick", action="store_true", help="15 turns, fewer counting rounds")
    args = p.parse_args(argv)
    turns = 15 if args.quick else args.turns
    with tempfile.TemporaryDirectory() as tmp:
        before = asyncio.run(_thread(turns, None, Path(tmp)))
        after = asyncio.run(_thread(turns, WINDOW, Path(tmp)))
    print(f"\n7. context: a {turns}-turn thread, {RESULT_CHARS:,}-character tool results, server window {WINDOW:,}")
    print(f"{'turn':>6} {'before':>8} {'after':>8}   (the server's count of the turn's first prompt)")
    for n in (n for n in SHOW if n <= turns):
        print(f"{n:>6} {before['firsts'][n - 1]:>8,} {after['firsts'][n - 1]:>8,}")
    for name, r in (("before", before), ("after", after)):
        over = sum(1 for f in r["firsts"] if f > WINDOW)
        print(f"{name}: largest prompt {r['max']:,} tokens, {over} turn(s) over the window, {r['errors']} "
              f"failed turn(s), {r['compactions']} compaction call(s), {r['refused']} refusal(s), "
              f"{r['seconds']:.1f} s")
    costs = counting(100 if args.quick else 1000)
    base = costs["json.dumps (baseline)"]
    print("counting a 20-message prompt (~20 KB):")
    for name, us in costs.items():
        print(f"  {name:<32} {us:9.1f} µs/call   {us / base:6.2f} x baseline")
    return {"before": before, "after": after, "counting": costs}


if __name__ == "__main__":
    main()
