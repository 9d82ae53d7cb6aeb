"""Shared pieces of the benchmarks: the fake model in its own process, the bench agent, timing helpers."""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy.engine import make_url  # noqa: E402

from bot.app import App, build_app  # noqa: E402
from bot.config import Settings  # noqa: E402
from bot.engine.model.client import preload  # noqa: E402
from bot.engine.run.context import ToolContext  # noqa: E402
from bot.engine.run.tooling import Tool, tool  # noqa: E402
from bot.gc_freeze import freeze_startup_objects  # noqa: E402

# tests.fakes.pgbouncer imports tests.helpers, which needs today's bot: imported when a pooler starts, so that
# older code can run on these helpers (bench/memory_before.py runs the code before issue 39)
if TYPE_CHECKING:
    from tests.fakes.pgbouncer import PgBouncer

T = TypeVar("T")
PG_ADMIN_URL = os.environ.get("YOKEBOT_BENCH_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres")
SYSTEM_PROMPT = "You are a benchmark agent. Call the tools you are asked to call, then answer in one line."
USER_TEXT = "run the two echoes"
MODEL = "bench-model"
BENCH_AGENT = f"""---
description: benchmark agent
tools: [echo]
max_iterations: 10
max_history_turns: 20
---
{SYSTEM_PROMPT}
"""


@tool("echo", "Echo the text back, `times` times.")
async def echo(ctx: ToolContext, text: str, times: int = 1) -> str:
    return " ".join([text] * times)


def echo_plain(text: str, times: int = 1) -> str:
    """The same tool for the bare loop, which has no ToolContext."""
    return " ".join([text] * times)


def registry() -> dict[str, Tool]:
    return {echo.name: echo}


# --- the fake model, in its own process ------------------------------------------------------------------
@contextmanager
def child_server(module: str, *args: str, what: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Run `python -m MODULE ARGS` (a fake that prints `READY <url>`), yield it and its URL; closing its stdin
    on exit tells it to stop."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.startswith("READY "):
            raise RuntimeError(f"{what} did not start (said {line!r})")
        yield proc, line.split(" ", 1)[1]
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def fake_llm(latency: float = 0.0, *flags: str) -> Iterator[str]:
    """Start `python -m bench.fake_llm` and yield its base URL; stop it on exit."""
    with child_server("bench.fake_llm", "--latency", str(latency), *flags, what="the fake model server") as (_, url):
        yield url


# --- the bot under test -----------------------------------------------------------------------------------
def write_bench_agent(base: Path) -> Path:
    agents = base / "agents"
    (agents / "bench").mkdir(parents=True, exist_ok=True)
    (agents / "bench" / "AGENT.md").write_text(BENCH_AGENT)
    return agents


def bench_settings(db_url: str, base_url: str, agents: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = dict(
        database_url=db_url,
        agents_dir=agents,
        default_agent="bench",
        openai_base_url=base_url,
        openai_api_key="sk-bench-key-123",
        model=MODEL,
        model_timeout_seconds=60,
    )
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@asynccontextmanager
async def bench_app(db_url: str, base_url: str, workdir: Path, direct_url: str | None = None) -> AsyncIterator[App]:
    """`direct_url`: `db_url` goes through a pooler (YOKEBOT_DATABASE_DIRECT_URL)."""
    settings = bench_settings(db_url, base_url, write_bench_agent(workdir), database_direct_url=direct_url)
    app = await build_app(settings, registry=registry())
    await ready(app)
    try:
        yield app
    finally:
        client = getattr(app.model, "client", None)
        if client is not None:  # App.close() leaves the SDK client to the garbage collector
            await client.close()
        await app.close()


async def ready(app: App) -> None:
    """What `yokebot run` does once it is up: the model SDK loaded, then the start-up objects frozen out of
    the garbage collector's way (bot/gc_freeze.py)."""
    await asyncio.wrap_future(preload())
    freeze_startup_objects()


def sqlite_url(workdir: Path, name: str = "bench.db") -> str:
    return f"sqlite+aiosqlite:///{workdir / name}"


@contextmanager
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="yokebot-bench-") as d:
        yield Path(d)


# --- PostgreSQL: a fresh database per run -----------------------------------------------------------------
async def _pg_admin(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN_URL.replace("postgresql+asyncpg", "postgresql"), timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def pg_available() -> bool:
    try:
        await _pg_admin("SELECT 1")
        return True
    except Exception:
        return False


@asynccontextmanager
async def pg_database() -> AsyncIterator[str]:
    name = f"yokebot_bench_{uuid.uuid4().hex[:10]}"
    await _pg_admin(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        await _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def pgbouncer(mode: Literal["transaction", "session"] = "transaction") -> Iterator[PgBouncer]:
    """A real PgBouncer (Debian's package) on a free port in front of the benchmark's PostgreSQL."""
    from tests.fakes.pgbouncer import PgBouncer

    pooler = PgBouncer(mode, server_port=make_url(PG_ADMIN_URL).port or 5432).start()
    try:
        yield pooler
    finally:
        pooler.close()


def pooled(pooler: PgBouncer, direct_url: str) -> str:
    """`direct_url`'s database through the pooler."""
    return pooler.url(direct_url.rsplit("/", 1)[1])


# --- measuring --------------------------------------------------------------------------------------------
def median_ms(seconds: Sequence[float]) -> float:
    return statistics.median(seconds) * 1000


def percentile(values: Sequence[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def rss_mb(pid: int | str = "self") -> float:
    """Resident set size from /proc (Linux), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS line in /proc/<pid>/status")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StallMeter:
    """A ticker that sleeps 5 ms and records how late it wakes: the longest time the loop was blocked."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.max_late = 0.0
        self.lates: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(self.interval)
            late = loop.time() - start - self.interval
            self.lates.append(late)
            self.max_late = max(self.max_late, late)

    def __enter__(self) -> StallMeter:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *_: object) -> None:
        if self._task is not None:
            self._task.cancel()


def loop_name() -> str:
    """The event loop the benchmarks run on: asyncio's own, as `yokebot run`; YOKEBOT_BENCH_LOOP=uvloop runs
    them on uvloop (when installed) to compare (bench/README.md: it did not win here, so it is not used)."""
    return "uvloop" if os.environ.get("YOKEBOT_BENCH_LOOP", "").strip().lower() == "uvloop" else "asyncio"


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run a benchmark's coroutine on `loop_name()`'s loop, every variant of the run on the same loop."""
    factory = None
    if loop_name() == "uvloop":
        import uvloop  # not a dependency: `pip install uvloop` to compare

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)



def turns_main(argv: list[str] | None, description: str, turns: int,
               measure: Callable[[int, int, bool], Coroutine[Any, Any, T]]) -> T:
    """The command line of a benchmark of turns: `measure(turns, rounds, use_pg)`, --quick for a smoke run."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="a few turns, SQLite only (smoke run)")
    p.add_argument("-n", "--turns", type=int, default=turns, help="turns per variant")
    p.add_argument("--no-pg", action="store_true", help="skip PostgreSQL")
    args = p.parse_args(argv)
    n, rounds = (args.turns, max(1, args.turns // 10)) if not args.quick else (10, 2)
    return run(measure(n, rounds, not args.no_pg and not args.quick))

def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def header(title: str) -> None:
    title = f"{title} [{loop_name()} loop]"
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)), flush=True)
