"""Issue 13.3 and 13.4: two instances on one PostgreSQL database. Started together on an empty database,
both come up (the migration runs under an advisory lock; before, both migrated and one exited). Quick
follow-ups in one thread handled by both: each turn's model request holds every earlier turn, and no two
turns' messages interleave (the per-session lock was a lock in one process)."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bot.app import build_app
from bot.engine.service import TurnRequest
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, Step
from tests.helpers import registry, write_agent
from tests.recovery.harness import Bot, free_port, wait_until

FOLLOW_UPS = 8


def readyz(port: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return resp.status
    except OSError:
        return 0


def test_two_instances_started_together_on_an_empty_database_both_come_up(
        tmp_path: Path, pg_database: str, fake_llm: FakeOpenAI):
    agents = tmp_path / "agents"
    write_agent(agents, "ops", "description: ops\ntools: [current_time]")
    base = {"YOKEBOT_DATABASE_URL": pg_database, "YOKEBOT_AGENTS_DIR": str(agents),
            "YOKEBOT_DEFAULT_AGENT": "ops", "OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": "sk-x1234567",
            "YOKEBOT_SCHEDULER_ENABLED": "false", "YOKEBOT_HTTP_HOST": "127.0.0.1"}
    ports = [str(free_port()), str(free_port())]
    bots = [Bot({**os.environ, **base, "YOKEBOT_HTTP_PORT": port}, tmp_path, f"bot{n}")
            for n, port in enumerate(ports)]
    try:
        for bot, port in zip(bots, ports, strict=True):
            wait_until(lambda port=port: readyz(port) == 200, 40, f"/readyz on {port}", bot)
        assert all(bot.proc.poll() is None for bot in bots)
        logs = "".join(bot.output() for bot in bots)
        assert logs.count("migrating database from empty") == 1  # one migrated, the other found head
    finally:
        codes = [bot.stop() for bot in bots]
    assert codes == [0, 0], "".join(bot.output()[-2000:] for bot in bots)


async def test_follow_ups_in_one_thread_across_two_instances_each_see_every_earlier_turn(
        pg_database: str, fake_llm: FakeOpenAI, agents_dir: Path):
    seen: list[int] = []

    def answer(body: dict[str, Any]) -> Step:
        users = [m for m in body["messages"] if m["role"] == "user"]
        seen.append(len(users))
        return Step("reply", content=f"answer to {users[-1]['content']}", delay=0.2)

    fake_llm.handler = answer
    settings = make_settings(pg_database, fake_llm, agents_dir, scheduler_enabled=False)
    first = await build_app(settings, registry=registry())
    second = await build_app(settings, registry=registry())  # another instance: its own pools and locks
    try:
        async def ask(n: int) -> None:
            await asyncio.sleep(0.03 * n)  # quick follow-ups, each before the one before it is answered
            app = (first, second)[n % 2]
            await app.service.handle(TurnRequest("slack", "C1", "1700000000.000001", f"follow-up {n}", "tester"))

        await asyncio.gather(*(ask(n) for n in range(FOLLOW_UPS)))
        assert sorted(seen) == list(range(1, FOLLOW_UPS + 1))  # the k-th turn saw the k-1 before it
        async with first.engine.connect() as conn:
            turn_ids = [r[0] for r in await conn.execute(text("SELECT turn_id FROM messages ORDER BY id"))]
        runs = [t for i, t in enumerate(turn_ids) if i == 0 or turn_ids[i - 1] != t]
        assert len(runs) == len(set(runs)) == FOLLOW_UPS, json.dumps(turn_ids)  # no two turns interleave
    finally:
        await first.close()
        await second.close()
