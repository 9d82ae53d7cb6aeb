"""Fixtures shared by the chat adapter tests (the fake servers themselves are in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chat.ops_agent import nginx_logs, shipped_ops
from tests.chat.slack_harness import OPS


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """An nginx error log with 502s, where the shipped ops agent's policy is pointed."""
    return nginx_logs(tmp_path)


@pytest.fixture
def slack_agents(agents_dir: Path, log_dir: Path) -> Path:
    """`tester` (the default agent) and the shipped `ops` agent, which answers in #ops (C_OPS)."""
    shipped_ops(agents_dir, log_dir, front=f'channels: ["{OPS}"]')
    return agents_dir
