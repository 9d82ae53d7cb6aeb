"""Keeps the benchmark scripts from rotting: benchmarks 1 and 5 in quick mode (a few real turns, a small burst)."""

from __future__ import annotations

import subprocess
import time

import pytest

from bench import context, overhead, progress, slack_ack, teams_ack
from bench._common import ROOT


def test_overhead_benchmark_runs_in_quick_mode(capsys):
    started = time.perf_counter()
    result = overhead.main(["--quick", "--no-pg"])  # raises if any turn answers wrongly
    out = capsys.readouterr().out
    assert result["a"] > 0 and result["b"] > 0 and result["b/a"] == result["b"] / result["a"]
    assert "b/a =" in out and "profile of (b)" in out and "yokebot (bot/)" in out
    assert time.perf_counter() - started < 30


def test_slack_ack_benchmark_runs_in_quick_mode(capsys):
    started = time.perf_counter()
    result = slack_ack.main(["--quick"])  # raises if an event is not acked, not answered, or answered twice
    out = capsys.readouterr().out
    assert set(result) == {"http/floor", "socket/sqlite", "http/sqlite"}  # the floor: HTTP's same-run baseline
    assert all(0 < r["p50"] <= r["p99"] <= r["max"] for r in result.values())
    assert out.count("ack p50") == 3 and "all 20 answered, once each" in out
    assert time.perf_counter() - started < 30


def test_teams_ack_benchmark_runs_in_quick_mode(capsys):
    result = teams_ack.main(["--quick"])  # raises if an activity is refused, not answered, or answered twice
    out = capsys.readouterr().out
    assert set(result) == {"floor", "auth", "yokebot"} and "answered: 20 of 20, each once: PASS" in out
    assert all(0 < r["p50_ms"] <= r["p99_ms"] for r in result.values())


def test_context_benchmark_runs_in_quick_mode(capsys):
    result = context.main(["--quick"])
    out = capsys.readouterr().out
    after = result["after"]
    assert after["errors"] == 0 and after["refused"] == 0 and after["max"] <= context.WINDOW
    assert after["compactions"] >= 1 and result["before"]["max"] > context.WINDOW
    assert "estimate, cached" in out and "x baseline" in out


def test_model_overhead_benchmark_runs_in_quick_mode(capsys):
    from bench import model_overhead

    model_overhead.main(["--quick"])
    out = capsys.readouterr().out
    assert "b/a wall" in out and "80 vs 2 messages" in out and "(b) growth" in out


def test_progress_benchmark_runs_in_quick_mode(capsys):
    result = progress.main(["--quick"])  # raises if a turn does not get its answer
    out = capsys.readouterr().out
    assert set(result) == {"a", "b", "c"}
    assert result["b"]["first_s"] < result["a"]["first_s"] and result["c"]["first_s"] < result["a"]["first_s"]
    assert "first visible text < 1 s with progress" in out


def test_delegation_benchmark_runs_in_quick_mode(capsys):
    from bench import delegation

    result = delegation.main(["--quick"])  # raises if a turn or a sub-agent answers wrongly
    out = capsys.readouterr().out
    assert set(result) == {"overhead", "at_once"} and "b - c =" in out and "three/one =" in out
    assert result["at_once"]["ratio"] < 2.0  # three sub-agents one after another would be 3x


def test_memory_before_benchmark_runs_the_code_before_issue_39_in_quick_mode(capsys):
    """Its driver (bench/_common.py, bench/overhead.py) must keep running the old `bot/`, which it cannot import
    anything newer from."""
    from bench import memory_before

    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{memory_before.BEFORE}^{{commit}}"],
                      capture_output=True).returncode:
        pytest.skip("this checkout has no git history back to before issue 39 (a shallow clone)")
    result = memory_before.main(["--quick"])  # raises if a worker runs the wrong code or a turn answers wrongly
    out = capsys.readouterr().out
    assert set(result) == {"sqlite_empty_now/before", "sqlite_1k_now/before"} and all(r > 0 for r in result.values())
    assert out.count("now/before =") == 2
