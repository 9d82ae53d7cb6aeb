"""A cap reached by two instances at once lets at most one turn through: real `yokebot ask` processes on one
SQLite file and on one PostgreSQL database, and two apps (two engines) on one PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.spend.conftest import PRICES, AppFactory, ask, capped

ROOT = Path(__file__).resolve().parents[2]
BUSY = "is nearly reached ($0.95 of $1.00 spent today, UTC) and another turn is using what is left"


async def near_the_cap(make_app: AppFactory, fake_llm: FakeOpenAI, agents_dir: Path) -> threading.Event:
    """$0.95 of the agent's $1.00 spent (one call: the next may cross it); the next model call waits for the event."""
    capped(agents_dir, "daily_usd: 1.0", tools="current_time")  # `yokebot ask` has the built-in tools only
    (agents_dir / "tester").rename(agents_dir.parent / "tester-unused")
    seed = await make_app()
    fake_llm.reply("seeded", usage=(950_000, 0))
    assert (await ask(seed, "seed")).answer == "seeded"
    release = threading.Event()
    fake_llm.reply("through", release=release).reply("a second one got through")
    return release


def _env(db_url: str, fake_llm: FakeOpenAI, agents_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "YOKEBOT_", "SLACK_", "DISCORD_"))}
    env.update(YOKEBOT_DATABASE_URL=db_url, YOKEBOT_AGENTS_DIR=str(agents_dir), YOKEBOT_MODEL="test-model",
               YOKEBOT_MODEL_PRICES=json.dumps(PRICES), OPENAI_BASE_URL=fake_llm.base_url,
               OPENAI_API_KEY="sk-test-key-123", PYTHONPATH=str(ROOT), YOKEBOT_LOG_LEVEL="WARNING")
    return env


async def test_two_processes_at_the_cap_let_at_most_one_turn_through(
    db_url: str, make_app: AppFactory, fake_llm: FakeOpenAI, agents_dir: Path
):
    release = await near_the_cap(make_app, fake_llm, agents_dir)
    env = _env(db_url, fake_llm, agents_dir)
    procs = [await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "ask", "--json", "--agent", "capped", f"question {n}", env=env, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE) for n in (1, 2)]
    waits = [asyncio.ensure_future(p.communicate()) for p in procs]
    done, _ = await asyncio.wait(waits, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    release.set()  # the first to finish was refused (or both got through: then the second reply ended it)
    outputs = [await asyncio.wait_for(w, 60) for w in waits]
    assert done
    assert all(out for out, _ in outputs), outputs
    results = [json.loads(out) for out, _ in outputs]
    assert sorted(r["stopped_by"] for r in results) == ["answer", "budget:daily_cost"], outputs
    assert {r["answer"] for r in results if r["stopped_by"] == "answer"} == {"through"}
    [refused] = [r["answer"] for r in results if r["stopped_by"] != "answer"]
    assert BUSY in refused
    assert len(fake_llm.requests) == 2  # the seed and the one turn let through


@pytest.mark.postgres
async def test_two_engines_on_one_postgresql_let_at_most_one_turn_through(
    pg_database: str, fake_llm: FakeOpenAI, agents_dir: Path, tmp_path: Path
):
    from bot.app import build_app
    from tests.conftest import make_settings
    from tests.helpers import registry

    apps = []

    async def make_app(**overrides: object):
        values = {"model_prices": PRICES, **overrides}
        app = await build_app(make_settings(pg_database, fake_llm, agents_dir, **values), registry=registry())
        apps.append(app)
        return app

    try:
        release = await near_the_cap(make_app, fake_llm, agents_dir)
        one, two = await make_app(), await make_app()
        turns = [asyncio.ensure_future(ask(app, "at once", thread=f"t{n}")) for n, app in enumerate((one, two))]
        done, _ = await asyncio.wait(turns, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        release.set()
        results = [await t for t in turns]
    finally:
        for app in apps:
            await app.close()
    assert done
    assert sorted(r.stopped_by for r in results) == ["answer", "budget:daily_cost"]
    assert BUSY in next(r.answer for r in results if r.stopped_by != "answer")
    assert len(fake_llm.requests) == 2
