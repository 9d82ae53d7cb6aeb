"""A small tree of agents for the delegation tests: `lead` hands work to `logs` (which can read a log file)
and `metrics` (which can only echo); `lead` itself cannot read logs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import App, build_app
from bot.engine.service import TurnRequest
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import registry, write_agent

LOG_LINE = '10.0.0.7 - - [03/Dec/2026:18:01:02 +0000] "GET /api/orders HTTP/1.1" 502 157'


def write_tree(agents: Path, logs: Path, lead: str = "", logs_extra: str = "", metrics_extra: str = "") -> None:
    write_agent(agents, "lead", f"""
description: the on-call lead
tools: [current_time]
delegate: [logs, metrics]
max_iterations: 6
{lead}
""", body="You are the lead. Hand log reading to logs and metrics to metrics.")
    write_agent(agents, "logs", f"""
description: reads the nginx logs and quotes the lines that matter
tools:
  tail_log: {{roots: [{logs}]}}
max_iterations: 4
{logs_extra}
""", body="You are the logs agent. Quote log lines exactly.")
    write_agent(agents, "metrics", f"""
description: answers questions about request rates
tools: [echo]
max_iterations: 3
{metrics_extra}
""", body="You are the metrics agent.")


@pytest.fixture
def tree_dirs(tmp_path: Path) -> tuple[Path, Path]:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "error.log").write_text(f"10.0.0.1 ok 200\n{LOG_LINE}\n")
    agents = tmp_path / "agents"
    write_tree(agents, logs)
    return agents, logs


@pytest.fixture
async def tree_bot(db_url: str, fake_llm: FakeOpenAI, tree_dirs: tuple[Path, Path]) -> AsyncIterator[App]:
    """The tree on SQLite and on PostgreSQL."""
    app = await build_app(make_settings(db_url, fake_llm, tree_dirs[0], default_agent="lead"), registry=registry())
    yield app
    await app.close()


def ask(text: str, thread: str = "t1", agent: str = "lead", **kw: object) -> TurnRequest:
    return TurnRequest(platform="test", channel="c1", thread=thread, text=text, agent=agent, **kw)  # type: ignore[arg-type]
