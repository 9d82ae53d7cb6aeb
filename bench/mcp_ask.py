"""Benchmark 10: what an agent's MCP servers cost `yokebot ask`.

`yokebot ask` starts the stdio MCP servers its agent declares before the turn and stops them after it. Here
the same one-call question (the fake model answers at once) is asked by fresh subprocesses of an agent with
no MCP server and of the same agent with three stdio servers (the fake MCP server of tests/fakes, in the
sandbox like any stdio server), interleaved; reported: the median wall time of each and the difference, next
to the floor measured in the same run: the three servers started in parallel straight from a shell and
asked to `initialize` (what the servers themselves cost, whoever starts them; the fake one imports the
Python MCP SDK, about 1.2 s of CPU each). Target: three servers add at most 1 s beyond that floor (they
start in parallel, in the sandbox, and are paid for once)."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import header, verdict
from tests.fakes.openai_server import FakeOpenAI, Step

ROOT = Path(__file__).resolve().parent.parent
FAKE_MCP = ROOT / "tests" / "fakes" / "mcp_server.py"
TARGET_EXTRA_S = 1.0


def agent(folder: Path, servers: int) -> Path:
    entries = "".join(f"""
  s{i}:
    command: {sys.executable}
    args: ["{FAKE_MCP}", "stdio"]
    read: ["{FAKE_MCP.parent}"]
    tools: [echo]""" for i in range(servers))
    mcp = f"\nmcp:{entries}" if servers else ""
    (folder / "ops").mkdir(parents=True, exist_ok=True)
    (folder / "ops" / "AGENT.md").write_text(f"---\ndescription: ops\ntools: [current_time]{mcp}\n---\nBe brief.\n")
    return folder


def env_for(base: Path, agents: Path, llm: FakeOpenAI) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("YOKEBOT_", "OPENAI_", "SLACK_", "DISCORD_"))}
    env.update(YOKEBOT_DATABASE_URL=f"sqlite+aiosqlite:///{base / 'bench.db'}", YOKEBOT_AGENTS_DIR=str(agents),
               YOKEBOT_DEFAULT_AGENT="ops", OPENAI_API_KEY="sk-bench", OPENAI_BASE_URL=llm.base_url,
               YOKEBOT_MODEL="bench-model", XDG_STATE_HOME=str(base), NO_COLOR="1")
    return env


def ask(env: dict[str, str]) -> float:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "bot", "ask", "hi"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    took = time.perf_counter() - started
    if out.returncode != 0 or "ok" not in out.stdout:
        raise RuntimeError(f"yokebot ask failed ({out.returncode}): {out.stderr[-2000:]}")
    return took


INITIALIZE = ('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
              '"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}\n')


def servers_alone(count: int) -> float:
    """Seconds until `count` fake servers started together have all answered `initialize`."""
    started = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, str(FAKE_MCP), "stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) for _ in range(count)]
    try:
        for proc in procs:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(INITIALIZE)
            proc.stdin.flush()
        for proc in procs:
            assert proc.stdout is not None
            if '"result"' not in proc.stdout.readline():
                raise RuntimeError("the fake MCP server did not answer initialize")
        return time.perf_counter() - started
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="2 runs each")
    p.add_argument("--no-pg", action="store_true", help="(SQLite only; accepted for `python -m bench`)")
    args = p.parse_args(argv)
    runs = 2 if args.quick else args.runs
    header(f"10. `yokebot ask` with three stdio MCP servers against none: {runs} fresh runs each, interleaved")
    llm = FakeOpenAI().start()
    llm.handler = lambda body: Step("reply", content="ok")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            (base / "none").mkdir()
            (base / "three").mkdir()
            envs = {"none": env_for(base / "none", agent(base / "none" / "agents", 0), llm),
                    "three": env_for(base / "three", agent(base / "three" / "agents", 3), llm)}
            for env in envs.values():
                ask(env)  # the database is made and migrated once, outside the figures
            times: dict[str, list[float]] = {"none": [], "three": [], "floor": []}
            for _ in range(runs):
                for name, env in envs.items():
                    times[name].append(ask(env))
                times["floor"].append(servers_alone(3))
    finally:
        llm.stop()
    none, three, floor = (statistics.median(times[k]) for k in ("none", "three", "floor"))
    extra = three - none
    print(f"no MCP server          {none:6.2f} s (median; min {min(times['none']):.2f}, max {max(times['none']):.2f})")
    print(f"three stdio servers    {three:6.2f} s (median; min {min(times['three']):.2f}, "
          f"max {max(times['three']):.2f})")
    print(f"the servers alone      {floor:6.2f} s (three started together until each answers initialize)")
    print(f"three servers add {extra:+.2f} s ({three / none:.2f} x), {extra - floor:+.2f} s beyond their own start: "
          f"<= +{TARGET_EXTRA_S:.0f} s: {verdict(extra - floor <= TARGET_EXTRA_S)}")
    return {"none_s": none, "three_s": three, "floor_s": floor, "extra_s": extra}


if __name__ == "__main__":
    main()
