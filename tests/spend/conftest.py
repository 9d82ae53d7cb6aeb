"""Agents with spend caps, on the real app (SQLite and PostgreSQL), the real openai SDK and the fake model server.
The price of `test-model` is $1 per million tokens either way, so a call of 600,000 prompt tokens costs $0.60."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build_app
from bot.engine.messages import TurnResult
from bot.engine.service import TurnRequest
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import registry, write_agent

PRICES = {"test-model": {"input": 1.0, "output": 1.0}}
CAPPED = """
description: an agent with spend caps
tools: [{tools}]
notify:
  default: slack:#ops-alerts
spend:
{spend}
"""


def capped(agents_dir: Path, spend: str, name: str = "capped", tools: str = "echo") -> Path:
    return write_agent(agents_dir, name, CAPPED.format(spend="\n".join(f"  {line}" for line in spend.splitlines()),
                                                       tools=tools))


AppFactory = Callable[..., Coroutine[Any, Any, App]]


@pytest.fixture
async def make_app(db_url: str, fake_llm: FakeOpenAI, agents_dir: Path) -> AsyncIterator[AppFactory]:
    """Build apps on the test's database (several: several instances); all closed at the end."""
    apps: list[App] = []

    async def make(**overrides: Any) -> App:
        # a model call is not retried for a slow fake on a loaded machine (a retry would be a second request)
        values: dict[str, Any] = {"model_prices": PRICES, "model_timeout_seconds": 60, **overrides}
        app = await build_app(make_settings(db_url, fake_llm, agents_dir, **values), registry=registry())
        apps.append(app)
        return app

    yield make
    for app in apps:
        await app.close()


async def ask(app: App, text: str, agent: str = "capped", channel: str = "C1", thread: str | None = None,
              trigger: str = "mention") -> TurnResult:
    return await app.service.handle(TurnRequest("slack", channel, thread or text, text, agent, trigger=trigger,  # type: ignore[arg-type]
                                                user="U1"))
