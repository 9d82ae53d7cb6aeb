"""Run every benchmark: `python -m bench [--quick] [--no-pg]` (about 7-10 minutes on 2 cores; --quick: ~1)."""

from __future__ import annotations

import argparse
import time

from bench import (
    concurrency,
    context,
    delegation,
    mcp_ask,
    memory_recall,
    memory_startup,
    memory_turn,
    model_overhead,
    overhead,
    progress,
    prompt_scale,
    slack_ack,
    spend,
    startup_cli,
    teams_ack,
)


def main() -> None:
    p = argparse.ArgumentParser(description="yokebot benchmarks (see bench/README.md)")
    p.add_argument("--quick", action="store_true", help="short runs, SQLite only: a smoke run, not figures")
    p.add_argument("--no-pg", action="store_true", help="skip the PostgreSQL variants")
    args = p.parse_args()
    flags = [f for f, on in (("--quick", args.quick), ("--no-pg", args.no_pg)) if on]
    started = time.perf_counter()
    overhead.main(flags)
    concurrency.main(flags)
    prompt_scale.main(flags)
    memory_startup.main(["--quick"] if args.quick else [])
    slack_ack.main(flags)
    context.main(["--quick"] if args.quick else [])
    model_overhead.main(flags)
    startup_cli.main(flags)
    progress.main(flags)
    mcp_ask.main(flags)
    memory_recall.main(flags)
    memory_turn.main(flags)
    teams_ack.main(["--quick"] if args.quick else [])
    delegation.main(flags)
    spend.main(flags)
    print(f"\nall benchmarks done in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
