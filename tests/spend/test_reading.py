"""How often the caps read the database: each scope once, then from the figure this process keeps (its own calls
added as they are answered); a figure a second old is read again in the background, one read per scope at a time,
and no turn waits for it."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from bot.app import App
from tests.fakes.openai_server import FakeOpenAI, Step
from tests.spend.conftest import AppFactory, ask, capped


def counted(app: App, hold: asyncio.Event | None = None) -> Counter[str]:
    """Count the ledger's reads; with `hold`, every read after the first of its scope waits for it."""
    assert app.spend is not None
    ledger: Any = app.spend.ledger
    original, counts = ledger.spent, Counter[str]()

    async def spent(scope: Any, *args: Any) -> Any:
        counts[scope.key] += 1
        if hold is not None and counts[scope.key] > 1:
            await hold.wait()
        return await original(scope, *args)

    ledger.spent = spent
    return counts


async def test_each_scope_is_read_once_then_turns_use_the_figure(make_app: AppFactory, fake_llm: FakeOpenAI,
                                                                 agents_dir: Path):
    capped(agents_dir, "daily_usd: 100\ndaily_tokens: 100000000")
    app = await make_app(spend_daily_usd=100.0)
    assert app.spend is not None
    app.spend.every = 3600.0  # no figure gets old during the test
    reads = counted(app)
    fake_llm.handler = lambda body: Step("reply", content="ok")
    for n in range(10):
        assert (await ask(app, f"question {n}")).answer == "ok"
    assert reads == {"all": 1, "agent:capped": 1}  # the global cap's scope and the agent's: once each


async def test_an_old_figure_is_read_again_in_the_background_without_a_turn_waiting(
    make_app: AppFactory, fake_llm: FakeOpenAI, agents_dir: Path
):
    capped(agents_dir, "daily_usd: 100")
    app = await make_app()
    assert app.spend is not None
    hold = asyncio.Event()
    reads = counted(app, hold)
    fake_llm.handler = lambda body: Step("reply", content="ok")
    assert (await ask(app, "first")).answer == "ok"  # its scope's first read: this turn waited for it
    app.spend.every = 0.0  # from now on every check finds the figure old
    for n in range(5):  # the read they start never finishes (held): no turn waits for it
        assert (await asyncio.wait_for(ask(app, f"question {n}"), 10)).answer == "ok"
    assert reads == {"agent:capped": 2}  # one read under way at a time per scope
    hold.set()
