"""Benchmark 11: several `yokebot run` instances on one PostgreSQL, direct and through a real PgBouncer in
transaction pooling (issue 44, docs/scale-out.md).

The fake Slack (its own process) spreads Socket Mode envelopes over the instances' connections, one each, in
turn, as Slack does; the model (its own process) answers every turn in one call after `--latency` seconds,
naming the question. A burst of `--mentions` mentions over `--threads` threads (each thread's mentions in order:
its first, then its follow-ups) goes out at once, and each variant waits until every one is answered:

  (1)  one instance, direct: the baseline;
  (4)  four instances, direct;
  (4p) four instances through PgBouncer (their locks, wake-ups and writer on the direct URL);
  (k)  four through PgBouncer, one of them killed with SIGKILL once a third of the answers are out.

Checked per variant: every mention answered exactly once, and each thread's answers in the order of its
questions. Printed: throughput (mentions/s) and its ratio to (1), the most database connections each
instance held (to PostgreSQL and to PgBouncer, read from /proc), PgBouncer's own server connections; for (k),
how long after the kill the killed instance's last turns were answered, against the lease. Each instance's
`YOKEBOT_SLACK_MAX_CONCURRENT_TURNS` (`--cap`) is what limits it when the model's latency dominates: four
instances can then reach four times one, less what the machine's cores cannot give. The default cap, 2, keeps
four instances cap-limited on a 2-core machine (what the 3.5x target is about); `--cap 8` shows where the CPU
limits them instead."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._common import (
    PG_ADMIN_URL,
    ROOT,
    child_server,
    free_port,
    header,
    pg_available,
    pg_database,
    pgbouncer,
    pooled,
    verdict,
    workdir,
)
from bench._common import (
    run as bench_run,
)
from bench.slack_ack import FakeSlackProcess
from tests.fakes.pgbouncer import PgBouncer
from tests.fakes.slack_server import BOT_USER, event_callback

TARGET_SPEEDUP = 3.5  # four instances against one, when each one's concurrency cap limits it
CHANNEL = "C_SCALE"
AGENT = "---\ndescription: scale-out benchmark\ntools: {}\n---\nYou answer briefly.\n"


@contextmanager
def spreading_slack() -> Iterator[FakeSlackProcess]:
    """The fake Slack in its own process, each envelope over one of the open connections, in turn."""
    with child_server("tests.fakes.slack_server", "--spread", what="the fake Slack") as (proc, slack_url):
        yield FakeSlackProcess(proc, slack_url)


# --- the instances: `yokebot run` processes --------------------------------------------------------------
@dataclass
class Instance:
    proc: subprocess.Popen[bytes]
    log: Path
    most: dict[str, int] = field(default_factory=lambda: {"postgresql": 0, "pgbouncer": 0})

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_instances(n: int, wd: Path, db_url: str, direct_url: str | None, llm_url: str, slack_url: str,
                    cap: int, lease: float) -> list[Instance]:
    agents = wd / "agents" / "scale"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "AGENT.md").write_text(AGENT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("YOKEBOT_", "SLACK_", "OPENAI_"))}
    env.update({"YOKEBOT_DATABASE_URL": db_url, "YOKEBOT_AGENTS_DIR": str(wd / "agents"),
                "YOKEBOT_DEFAULT_AGENT": "scale", "OPENAI_BASE_URL": llm_url, "OPENAI_API_KEY": "sk-bench-key-123",
                "YOKEBOT_MODEL": "bench-model", "SLACK_BOT_TOKEN": "xoxb-bench", "SLACK_APP_TOKEN": "xapp-bench",
                "SLACK_API_URL": slack_url, "YOKEBOT_HTTP_HOST": "127.0.0.1", "YOKEBOT_SCHEDULER_ENABLED": "false",
                "YOKEBOT_SLACK_MAX_CONCURRENT_TURNS": str(cap), "YOKEBOT_INBOX_LEASE_SECONDS": str(lease),
                "YOKEBOT_PROGRESS_LIVE": "false", "YOKEBOT_LOG_LEVEL": "WARNING", "PYTHONPATH": str(ROOT)})
    if direct_url is not None:
        env["YOKEBOT_DATABASE_DIRECT_URL"] = direct_url
    out: list[Instance] = []
    for i in range(n):
        log = wd / f"instance-{i}-{time.monotonic_ns()}.log"
        proc = subprocess.Popen([sys.executable, "-m", "bot", "run"], cwd=wd, stdout=log.open("wb"),
                                stderr=subprocess.STDOUT, env={**env, "YOKEBOT_HTTP_PORT": str(free_port())})
        out.append(Instance(proc, log))
    return out


# --- database connections per process, from /proc --------------------------------------------------------
def _sockets(pid: int) -> set[str]:
    try:
        links = (os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd"))
        return {link[8:-1] for link in links if link.startswith("socket:[")}
    except OSError:
        return set()


def _established(pid: int) -> list[tuple[int, int]]:
    """(local port, remote port) of each established TCP connection of a process."""
    inodes, out = _sockets(pid), []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "01" and fields[9] in inodes:  # ESTABLISHED
                out.append((int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16)))
    return out


def sample(instances: list[Instance], pg_port: int, pooler_port: int | None) -> None:
    for inst in instances:
        if inst.proc.poll() is not None:
            continue
        peers = [remote for _local, remote in _established(inst.proc.pid)]
        inst.most["postgresql"] = max(inst.most["postgresql"], peers.count(pg_port))
        if pooler_port is not None:
            inst.most["pgbouncer"] = max(inst.most["pgbouncer"], peers.count(pooler_port))


# --- the burst -------------------------------------------------------------------------------------------
def burst(mentions: int, threads: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Each thread's mentions in order (its first, then follow-ups in it), the threads interleaved; and the
    thread (root ts) of each question."""
    per = max(1, mentions // threads)
    base = 1_600_000_000  # before any ts the fake Slack gives a post (1_700_000_000 + n): answers come after
    roots = {t: f"{base}.{t:06d}" for t in range(threads)}
    payloads, thread_of = [], {}
    for k in range(per):
        for t in range(threads):
            ts = roots[t] if k == 0 else f"{base + k}.{t:06d}"
            question = f"q{t:04d}-{k:02d}"
            event = {"type": "app_mention", "user": "U0BENCH", "text": f"<@{BOT_USER}> {question}", "ts": ts,
                     "channel": CHANNEL, "event_ts": ts}
            if k:
                event["thread_ts"] = roots[t]
            payloads.append(event_callback(event, f"EvSCALE{t:05d}{k:03d}{base}"))
            thread_of[question] = roots[t]
    return payloads, thread_of


@dataclass
class Outcome:
    seconds: float
    answered: int
    twice: int
    missing: int
    out_of_order: int
    most: list[dict[str, int]]
    server_connections: int = 0
    takeover_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.twice == 0 and self.missing == 0 and self.out_of_order == 0


def check(answers: list[tuple[str | None, str]], thread_of: dict[str, str]) -> tuple[int, int, int]:
    """(answered twice, never answered, threads whose answers came out of order)."""
    seen: dict[str, int] = {}
    by_thread: dict[str, list[str]] = {}
    for thread, text in answers:
        question = text.removeprefix("answer to: ").strip()
        seen[question] = seen.get(question, 0) + 1
        by_thread.setdefault(thread or "", []).append(question)
    twice = sum(n - 1 for n in seen.values() if n > 1)
    missing = sum(1 for q in thread_of if q not in seen)
    disorder = sum(1 for qs in by_thread.values() if qs != sorted(qs))
    return twice, missing, disorder


async def pooler_server_connections(pooler: PgBouncer | None, direct_url: str) -> int:
    """PgBouncer's own connections to PostgreSQL (its pool), now."""
    if pooler is None:
        return 0
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN_URL.replace("postgresql+asyncpg", "postgresql"), timeout=5)
    try:
        ports = {local for pid in _pids_of(pooler) for local, _remote in _established(pid)}
        rows = await conn.fetch("SELECT client_port FROM pg_stat_activity WHERE datname = $1",
                                direct_url.rsplit("/", 1)[1])
        return sum(1 for r in rows if r["client_port"] in ports)
    finally:
        await conn.close()


def _pids_of(pooler: PgBouncer) -> list[int]:
    pidfile = pooler.root / "pgbouncer.pid"
    try:
        return [int(pidfile.read_text().strip())]
    except (OSError, ValueError):
        return []


async def variant(n: int, llm_url: str, wd: Path, args: argparse.Namespace, pooler: PgBouncer | None,
                  kill_one: bool = False) -> Outcome:
    with spreading_slack() as slack:
        async with AsyncExitStack() as stack:
            direct = await stack.enter_async_context(pg_database())
            url = pooled(pooler, direct) if pooler is not None else direct
            instances = start_instances(n, wd, url, direct if pooler is not None else None, llm_url,
                                        slack.api_url, args.cap, args.lease)
            try:
                return await drive(instances, slack, args, pooler, direct, kill_one)
            finally:
                for inst in instances:
                    inst.stop()


async def drive(instances: list[Instance], slack: FakeSlackProcess, args: argparse.Namespace,
                pooler: PgBouncer | None, direct: str, kill_one: bool) -> Outcome:
    deadline = time.monotonic() + 120
    while await slack.request("open_connections") < len(instances):
        dead = [i.log.read_text()[-2000:] for i in instances if i.proc.poll() is not None]
        if dead or time.monotonic() > deadline:
            raise RuntimeError("an instance did not start:\n" + "\n".join(dead))
        await asyncio.sleep(0.2)
    payloads, thread_of = burst(args.mentions, args.threads)
    pg_port = int(direct.split("@", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
    start = time.monotonic()
    acks = await slack.request("push_burst", payloads=payloads, timeout=60.0)
    if any(a is None for a in acks):
        raise RuntimeError(f"{sum(a is None for a in acks)} mentions were not acknowledged")
    killed_at: float | None = None
    last_new, count = time.monotonic(), 0
    waiting: dict[str, int] = {}  # at the kill: per thread, its mentions not answered yet
    resumed: dict[str, float] = {}  # per such thread: when its next answer came
    while count < len(payloads):
        sample(instances, pg_port, pooler.port if pooler is not None else None)
        now = await slack.request("count", method="chat.postMessage")
        if kill_one and (killed_at is None or len(resumed) < len(waiting)):
            per_thread = _answers_per_thread(await slack.request("answers"))
            if killed_at is None and now >= len(payloads) // 3:
                instances[-1].kill9()
                killed_at = time.monotonic()
                total = _per_thread_total(thread_of)
                waiting = {t: per_thread.get(t, 0) for t in total if per_thread.get(t, 0) < total[t]}
            elif killed_at is not None:
                resumed |= {t: time.monotonic() for t, n in waiting.items()
                            if t not in resumed and per_thread.get(t, 0) > n}
        if now != count:
            last_new, count = time.monotonic(), now
        elif time.monotonic() - last_new > args.lease * 3 + 30:
            break  # nothing new for long: some mention is lost (reported below)
        await asyncio.sleep(0.1)
    finished = time.monotonic()
    servers = await pooler_server_connections(pooler, direct)
    await asyncio.sleep(0.5)  # an answer posted twice would come about now
    answers: list[tuple[str | None, str]] = [(a[0], a[1]) for a in await slack.request("answers")]
    twice, missing, disorder = check(answers, thread_of)
    # the longest a thread that had mentions waiting at the kill went without an answer after it: the threads
    # whose next mention the killed instance held wait for its lease to run out
    longest = max(resumed.values(), default=finished) - killed_at if killed_at is not None else None
    return Outcome(finished - start, len(answers), twice, missing, disorder, [i.most for i in instances], servers,
                   takeover_s=longest)


def _answers_per_thread(answers: list[list[str | None]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for thread, _text in answers:
        out[thread or ""] = out.get(thread or "", 0) + 1
    return out


def _per_thread_total(thread_of: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for thread in thread_of.values():
        out[thread] = out.get(thread, 0) + 1
    return out


def line(label: str, o: Outcome, base: Outcome | None, mentions: int) -> None:
    rate = mentions / o.seconds
    ratio = f"{(base.seconds / o.seconds):.2f}x (1)" if base is not None else "baseline"
    conns = ", ".join(f"{m['postgresql']}+{m['pgbouncer']}" for m in o.most)
    print(f"  ({label:2}) {o.seconds:6.1f} s  {rate:6.1f} mentions/s  {ratio:14}  answered {o.answered}, twice "
          f"{o.twice}, missing {o.missing}, threads out of order {o.out_of_order}  {verdict(o.ok)}")
    print(f"       connections per instance (most at once, PostgreSQL+PgBouncer): {conns}"
          + (f"; PgBouncer's own to PostgreSQL at the end: {o.server_connections}" if o.server_connections else ""))


async def run(args: argparse.Namespace) -> dict[str, float]:
    header(f"11. scale-out: {args.mentions} mentions over {args.threads} threads, {args.latency * 1000:.0f} ms "
           f"model latency, {args.cap} turns per instance at once")
    if not await pg_available():
        print("PostgreSQL is not reachable: skipped")
        return {}
    with workdir() as wd, child_server("bench.fake_llm", "--latency", str(args.latency), "--answer-the-question",
                                       what="the fake model server") as (_, llm_url):
        want = set(args.only.split(",")) if args.only else {"1", "4", "4p", "k"}
        one = await variant(1, llm_url, wd, args, None) if want & {"1", "4", "4p"} else None
        if one is not None:
            line("1", one, None, args.mentions)
        four = await variant(args.instances, llm_url, wd, args, None) if "4" in want else None
        if four is not None:
            line("4", four, one, args.mentions)
        with pgbouncer("transaction") as pooler:
            four_pooled = await variant(args.instances, llm_url, wd, args, pooler) if "4p" in want else None
            if four_pooled is not None:
                line("4p", four_pooled, one, args.mentions)
            killed = await variant(args.instances, llm_url, wd, args, pooler, kill_one=True) if "k" in want else None
            if killed is not None:
                line("k", killed, one, args.mentions)
    out: dict[str, float] = {}
    if one is not None and four is not None and four_pooled is not None:
        ideal = args.mentions * args.latency / args.cap
        speedup, speedup_pooled = one.seconds / four.seconds, one.seconds / four_pooled.seconds
        print(f"  four against one: direct {speedup:.2f}x, through PgBouncer {speedup_pooled:.2f}x   target >= "
              f"{TARGET_SPEEDUP}   {verdict(min(speedup, speedup_pooled) >= TARGET_SPEEDUP)}")
        print(f"  (one instance's cap alone allows {ideal:.1f} s; four's {ideal / args.instances:.1f} s)")
        out |= {"speedup": speedup, "speedup_pooled": speedup_pooled, "one_s": one.seconds, "four_s": four.seconds,
                "four_pooled_s": four_pooled.seconds}
    if killed is not None and killed.takeover_s is not None:
        within = killed.takeover_s <= 1.5 * args.lease + 5 * args.latency + 2
        print(f"  kill -9 of one of four: every thread waiting at the kill had its next answer within "
              f"{killed.takeover_s:.1f} s (lease {args.lease:.0f} s: taken over within 1.5 leases, plus the turn)"
              f"   {verdict(killed.ok and within)}")
        out |= {"killed_ok": float(killed.ok), "takeover_s": killed.takeover_s}
    return out


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(description="Benchmark 11: four `yokebot run` instances, direct and via PgBouncer")
    p.add_argument("--mentions", type=int, default=1000)
    p.add_argument("--threads", type=int, default=200)
    p.add_argument("--latency", type=float, default=0.3, help="seconds per model call")
    p.add_argument("--cap", type=int, default=2,
                   help="YOKEBOT_SLACK_MAX_CONCURRENT_TURNS per instance (2: the cap, not the CPU, limits four "
                        "instances on 2 cores)")
    p.add_argument("--instances", type=int, default=4)
    p.add_argument("--lease", type=float, default=6.0, help="YOKEBOT_INBOX_LEASE_SECONDS")
    p.add_argument("--quick", action="store_true", help="100 mentions over 20 threads")
    p.add_argument("--only", default="", help="some of the variants, comma-separated: 1,4,4p,k (default: all)")
    args = p.parse_args(argv)
    if args.quick:
        args.mentions, args.threads = 100, 20
    return bench_run(run(args))


if __name__ == "__main__":
    main()
