"""Benchmark 8: how soon the command line answers.

Each figure is the median of several fresh subprocesses, next to `python -c pass` and `python -c "import
openai"` measured in the same run (the machine may be loaded; the ratios are what to compare):
  - `yokebot --help`                          target < 0.4 s
  - `python -c "import bot.app"`              target <= the openai import + 0.3 s
  - `yokebot chat` to its prompt (a temp SQLite database that exists already, the shipped agents; the
    model is not called before the first line is typed)   target < 1.5 s
and which of slack_bolt, discord, apscheduler, prometheus_client, aiohttp, mcp `import bot.cli` loads."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
YOKEBOT = Path(sys.executable).parent / "yokebot"
HEAVY = ("slack_bolt", "discord", "apscheduler", "prometheus_client", "aiohttp", "mcp", "openai", "sqlalchemy")


def _env(db: Path, source: Path = ROOT) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("YOKEBOT_", "OPENAI_", "SLACK_", "DISCORD_"))}
    env.update(YOKEBOT_DATABASE_URL=f"sqlite+aiosqlite:///{db}", YOKEBOT_AGENTS_DIR=str(ROOT / "agents"),
               OPENAI_API_KEY="sk-bench", OPENAI_BASE_URL="http://127.0.0.1:9/v1", YOKEBOT_DEFAULT_AGENT="ops",
               XDG_STATE_HOME=str(db.parent), NO_COLOR="1", PYTHONPATH=str(source))
    return env


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, cwd=env["PYTHONPATH"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - started


def _chat_prompt(env: dict[str, str]) -> float:
    """Seconds from spawning `yokebot chat` to its greeting on stdout; then stdin closes and it leaves."""
    started = time.perf_counter()
    proc = subprocess.Popen([*_yokebot(env), "chat"], cwd=env["PYTHONPATH"], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    seen = ""
    while "talking to agent" not in seen:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"yokebot chat ended before its prompt: {seen!r}")
        seen += line
    took = time.perf_counter() - started
    proc.stdin.close()
    proc.wait(timeout=30)
    return took


def _yokebot(env: dict[str, str]) -> list[str]:
    """The installed `yokebot` script, or `python -m bot` for another source tree (a before/after run)."""
    return [str(YOKEBOT)] if Path(env["PYTHONPATH"]) == ROOT else [sys.executable, "-m", "bot"]


def _median(fn: object, runs: int) -> float:
    return statistics.median(fn() for _ in range(runs))  # type: ignore[operator]


def loaded_by_cli(env: dict[str, str]) -> list[str]:
    code = f"import sys, bot.cli; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=env["PYTHONPATH"], env=env, capture_output=True, text=True,
                         check=True)
    return out.stdout.split()


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="3 runs each")
    p.add_argument("--no-pg", action="store_true", help="(no PostgreSQL here; accepted for `python -m bench`)")
    p.add_argument("--source", type=Path, default=ROOT, help="another checkout to measure (a before/after run)")
    args = p.parse_args(argv)
    runs = 3 if args.quick else args.runs
    with tempfile.TemporaryDirectory() as tmp:
        env = _env(Path(tmp) / "yokebot.db", args.source.resolve())
        py = [sys.executable, "-c"]
        _chat_prompt(env)  # creates and migrates the database: the figures are for one that exists
        figures = {
            "python -c pass": _median(lambda: _timed([*py, "pass"], env), runs),
            "import openai": _median(lambda: _timed([*py, "import openai"], env), runs),
            "import bot.app": _median(lambda: _timed([*py, "import bot.app"], env), runs),
            "yokebot --help": _median(lambda: _timed([*_yokebot(env), "--help"], env), runs),
            "chat prompt": _median(lambda: _chat_prompt(env), runs),
        }
        heavy = loaded_by_cli(env)
    print(f"\n== benchmark 8: command-line start-up (median of {runs} fresh processes; {args.source}) ==")
    for name, seconds in figures.items():
        print(f"  {name:<16} {seconds:6.2f} s")
    extra = figures["import bot.app"] - figures["import openai"]
    print(f"  import bot.app - import openai = {extra:+.2f} s (target <= +0.30 s)")
    print(f"  --help {figures['yokebot --help']:.2f} s (target < 0.40 s); chat prompt {figures['chat prompt']:.2f} s "
          "(target < 1.50 s)")
    print(f"  import bot.cli loads: {' '.join(heavy) or 'none of ' + ', '.join(HEAVY)}")
    return figures


if __name__ == "__main__":
    main()
