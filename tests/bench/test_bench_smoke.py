"""Keeps the benchmark scripts from rotting: benchmark 1 in quick mode (a few real turns, both variants)."""

from __future__ import annotations

import time

from bench import overhead


def test_overhead_benchmark_runs_in_quick_mode(capsys):
    started = time.perf_counter()
    result = overhead.main(["--quick", "--no-pg"])  # raises if any turn answers wrongly
    out = capsys.readouterr().out
    assert result["a"] > 0 and result["b"] > 0 and result["b/a"] == result["b"] / result["a"]
    assert "b/a =" in out and "profile of (b)" in out and "yokebot (bot/)" in out
    assert time.perf_counter() - started < 30
