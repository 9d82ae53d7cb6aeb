"""Fixtures shared by the chat adapter tests (the fake servers themselves are in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chat.ops_agent import nginx_logs, shipped_ops
from tests.chat.slack_harness import OPS
from tests.fakes.discord_server import BOB, ONCALL_ROLE, OTHER
from tests.helpers import write_agent


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """An nginx error log with 502s, where the shipped ops agent's policy is pointed."""
    return nginx_logs(tmp_path)


@pytest.fixture
def slack_agents(agents_dir: Path, log_dir: Path) -> Path:
    """`tester` (the default agent) and the shipped `ops` agent, which answers in #ops (C_OPS)."""
    shipped_ops(agents_dir, log_dir, front=f'channels: ["{OPS}"]')
    return agents_dir


# The shipped ops agent, its alerts sent to the Discord team channel, answering the on-call role and Bob.
OPS_ACCESS = f"""
access:
  roles: ["{ONCALL_ROLE}"]
  users: ["discord:{BOB}"]
"""





@pytest.fixture
def discord_agents(agents_dir: Path, log_dir: Path) -> Path:
    shipped_ops(agents_dir, log_dir, front=OPS_ACCESS, notify_to="discord:#ops-alerts")
    write_agent(agents_dir, "other", f"description: routed by channel\nchannels: ['discord:{OTHER}']")
    return agents_dir
