"""Keeps bench/alerts.py from rotting: a small storm, checked for a 200 and a root per group (no timing)."""

from __future__ import annotations

import pytest

from bench import alerts

pytestmark = pytest.mark.slow


def test_the_alert_storm_benchmark_runs_small(capsys):
    result = alerts.main(["--groups", "5", "--seconds", "0.2"])
    assert result["sqlite"]["roots"] == 5 and 0 < result["sqlite"]["p50"] <= result["sqlite"]["p99"]
    assert "5/5 roots posted" in capsys.readouterr().out
