"""Guardrails' cost per turn (docs/guardrails.md): benchmark 1's turn (3 model calls, 2 tool calls, full audit on
SQLite, the scripted model in its own process) on three agents of one app, interleaved in rounds:
  (off)     every stage's rules off (`[]`): the baseline,
  (default) no `guardrails:` key: secrets redacted at every stage,
  (all)     every built-in rule at every stage: pii (all five kinds, `ip` too) redact, secrets redact,
            injection warn, a regex warn.
Target: (all) - (off) <= 0.5 ms per turn. Then the streamed answer's hold alone: benchmark 1's answer fed in
8-character fragments through the output rules of (all), per answer."""

from __future__ import annotations

import argparse
import time
from contextlib import AsyncExitStack

from bench._common import (
    SYSTEM_PROMPT,
    USER_TEXT,
    bench_settings,
    fake_llm,
    header,
    median_ms,
    ready,
    registry,
    sqlite_url,
    verdict,
    workdir,
)
from bench._common import run as bench_run
from bench.fake_llm import FINAL_ANSWER
from bench.overhead import interleaved
from bot.app import App, build_app
from bot.engine.guard import StreamHold
from bot.engine.service import TurnRequest
from bot.redact import PATTERNS_ONLY

TARGET_MS = 0.5
OFF = "guardrails: {input: [], tool_args: [], tool_result: [], output: []}\n"
_ALL_RULES = ("[{type: pii, action: redact, kinds: [email, phone, credit_card, iban, ip]}, "
              "{type: secrets, action: redact}, {type: injection, action: warn}, "
              "{type: regex, action: warn, name: drop, pattern: '(?i)drop\\s+table'}]")
ALL = "guardrails:\n" + "".join(f"  {stage}: {_ALL_RULES}\n" for stage in ("input", "tool_args", "tool_result",
                                                                           "output"))
AGENTS = {"off": OFF, "default": "", "all": ALL}


class Turns:
    """Benchmark 1's turn for one agent; each turn a new thread (a fresh mention)."""

    def __init__(self, app: App, agent: str) -> None:
        self.app, self.agent, self.n = app, agent, 0

    async def __call__(self) -> str:
        self.n += 1
        req = TurnRequest(platform="bench", channel="c1", thread=f"{self.agent}-{self.n}", text=USER_TEXT,
                          agent=self.agent, trigger="mention", user="u1")
        result = await self.app.service.handle(req)
        if result.iterations != 3 or len(result.tool_calls) != 2 or result.error:
            raise RuntimeError(f"unexpected turn: {result}")
        return result.answer


def stream_cost(answers: int) -> float:
    """µs per answer to pass benchmark 1's answer through the (all) output rules, 8 characters at a time."""
    from bot.engine.spec.guardrails import GuardRule

    rules = (GuardRule("pii", "redact", kinds=("email", "phone", "credit_card", "iban", "ip")),
             GuardRule("secrets", "redact"), GuardRule("injection", "warn"),
             GuardRule("regex", "warn", name="drop", pattern=r"(?i)drop\s+table"))
    text = FINAL_ANSWER * 3
    started = time.perf_counter()
    for _ in range(answers):
        hold = StreamHold(rules, PATTERNS_ONLY)
        for i in range(0, len(text), 8):
            hold.feed(text[i:i + 8])
    return (time.perf_counter() - started) / answers * 1e6


async def run(n: int, rounds: int) -> dict[str, float]:
    header(f"guardrails: cost per turn ({n} turns per variant, benchmark 1's turn on SQLite)")
    with fake_llm(0.0) as base_url, workdir() as wd:
        agents = wd / "agents"
        for name, rails in AGENTS.items():
            (agents / name).mkdir(parents=True, exist_ok=True)
            (agents / name / "AGENT.md").write_text(f"---\ntools: [echo]\n{rails}---\n{SYSTEM_PROMPT}\n")
        async with AsyncExitStack() as stack:
            app = await build_app(bench_settings(sqlite_url(wd), base_url, agents, default_agent="off"),
                                  registry=registry())
            stack.push_async_callback(app.close)
            await ready(app)
            times = await interleaved({name: Turns(app, name) for name in AGENTS}, n, rounds)
    med = {k: median_ms(v) for k, v in times.items()}
    for k, v in med.items():
        print(f"  ({k:7}) median {v:7.3f} ms/turn   ({len(times[k])} turns)")
    out = {**med, "all-off": med["all"] - med["off"], "default-off": med["default"] - med["off"],
           "all/off": med["all"] / med["off"]}
    print(f"  all - off = {out['all-off']:+.3f} ms/turn (ratio {out['all/off']:.3f})   target <= {TARGET_MS} ms   "
          f"{verdict(out['all-off'] <= TARGET_MS)}")
    print(f"  default - off = {out['default-off']:+.3f} ms/turn")
    out["stream_us"] = stream_cost(200 if n > 50 else 20)
    print(f"  a streamed answer ({len(FINAL_ANSWER) * 3} characters in 8-character fragments) through (all)'s "
          f"output rules: {out['stream_us']:.0f} µs")
    return out


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(description="guardrails: cost per turn against no guardrails, same run")
    p.add_argument("--quick", action="store_true", help="a few turns only (smoke run)")
    p.add_argument("-n", "--turns", type=int, default=300, help="turns per variant")
    args = p.parse_args(argv)
    n, rounds = (args.turns, max(1, args.turns // 10)) if not args.quick else (12, 2)
    return bench_run(run(n, rounds))


if __name__ == "__main__":
    main()
