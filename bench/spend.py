"""Benchmark: what the spend caps cost a turn (docs/guardrails.md "Spend caps").

The same 3-call, 2-tool turn as benchmark 1 (the scripted server in its own process), N times each, interleaved:
  (a) the bench agent without caps (the baseline of the ratio),
  (b) the same agent under `spend: {daily_usd, monthly_usd, daily_tokens}` and YOKEBOT_SPEND_DAILY_USD: two
      scopes checked before each of its 3 model calls,
on SQLite, and on PostgreSQL when it is reachable. Prints per-turn medians, b/a, and the database round trips
the caps made (`SqlSpendLedger` reads, slot takes, notice claims: the only places the check touches the
database), per turn and per second: the common case adds none to a turn; a scope is read at most once a second,
in the background."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from bench._common import (
    BENCH_AGENT,
    MODEL,
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
    workdir,
)
from bench.overhead import YokeTurns, interleaved
from bot.app import App, build_app

CAPS = "spend:\n  daily_usd: 1000000\n  monthly_usd: 1000000\n  daily_tokens: 1000000000\n"
PRICES = {MODEL: {"input": 0.25, "output": 2.0}}


@asynccontextmanager
async def app_with(db_url: str, base_url: str, where: Path, caps: bool) -> AsyncIterator[App]:
    agents = where / "agents"
    (agents / "bench").mkdir(parents=True, exist_ok=True)
    (agents / "bench" / "AGENT.md").write_text(BENCH_AGENT.replace("---\n", "---\n" + CAPS, 1) if caps
                                                else BENCH_AGENT)
    extra: dict[str, Any] = {"model_prices": PRICES, **({"spend_daily_usd": 1_000_000.0} if caps else {})}
    app = await build_app(bench_settings(db_url, base_url, agents, **extra), registry=registry())
    await ready(app)
    try:
        yield app
    finally:
        await app.close()


def count_ledger(app: App) -> Counter[str]:
    """Count the caps' database calls (the ledger's methods, wrapped on this app's instance)."""
    counts: Counter[str] = Counter()
    assert app.spend is not None
    ledger: Any = app.spend.ledger
    for name in ("spent", "take", "first"):
        original = getattr(ledger, name)

        async def counted(*args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
            counts[_name] += 1
            return await _original(*args, **kwargs)

        setattr(ledger, name, counted)
    return counts


async def run(n: int, rounds: int, use_pg: bool) -> dict[str, float]:
    header(f"spend caps: per-turn cost ({n} turns per variant, 3 model calls + 2 tool calls each)")
    out: dict[str, float] = {}
    with fake_llm(0.0) as base_url, workdir() as wd:
        databases = [("SQLite", sqlite_url(wd, "plain.db"), sqlite_url(wd, "capped.db"))]
        async with AsyncExitStack() as stack:
            if use_pg and await pg_available():
                databases.append(("PostgreSQL", await stack.enter_async_context(pg_database()),
                                  await stack.enter_async_context(pg_database())))
            elif use_pg:
                print("PostgreSQL is not reachable: its variant is skipped")
            for name, plain_url, capped_url in databases:
                plain = await stack.enter_async_context(app_with(plain_url, base_url, wd / f"{name}-a", False))
                capped = await stack.enter_async_context(app_with(capped_url, base_url, wd / f"{name}-b", True))
                counts = count_ledger(capped)
                started = time.perf_counter()
                times = await interleaved({"a": YokeTurns(plain, "a"), "b": YokeTurns(capped, "b")}, n, rounds)
                seconds = time.perf_counter() - started
                out.update(report(name, times, counts, seconds))
    return out


def report(name: str, times: dict[str, list[float]], counts: Counter[str], seconds: float) -> dict[str, float]:
    a, b = median_ms(times["a"]), median_ms(times["b"])
    turns = len(times["b"]) + max(3, len(times["b"]) // 20)  # the measured turns and the warm-up
    reads = sum(counts.values())
    print(f"  {name}:")
    print(f"    (a) no caps            median {a:7.2f} ms/turn   ({len(times['a'])} turns)")
    print(f"    (b) caps on 2 scopes   median {b:7.2f} ms/turn   ({len(times['b'])} turns)")
    print(f"    b/a = {b / a:.2f}")
    print(f"    the caps' database calls: {reads} ({dict(counts)}) for ~{turns} turns in {seconds:.1f} s: "
          f"{reads / turns:.3f} per turn, {reads / seconds:.2f} per second (2 scopes: at most ~2 a second, and "
          "none waited for by a turn after each scope's first)")
    key = name.lower()
    return {f"{key}_a_ms": a, f"{key}_b_ms": b, f"{key}_b/a": b / a, f"{key}_calls_per_turn": reads / turns}


def main(argv: list[str] | None = None) -> dict[str, float]:
    return turns_main(argv, "spend caps: per-turn cost and database round trips", 300, run)


if __name__ == "__main__":
    main()
