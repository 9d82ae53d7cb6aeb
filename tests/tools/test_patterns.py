"""Regular expressions the model writes cannot wedge the bot: RE2 matches in time linear in the text, a pattern
RE2 cannot run is one clear sentence, and a scan the tool gave up on stops reading instead of running on in
a worker thread."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from bot.engine.spec.profiles import ProfileLoader
from bot.tools import builtin_tools
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import write_agent
from tests.test_cli import base_env, yokebot
from tests.tools.conftest import Sandbox, policy

EVIL = "(a|a)*b"  # exponential for a backtracking engine on a line of a's


async def test_an_exponential_pattern_over_a_long_line_finishes_fast(sandbox: Sandbox):
    (sandbox.root / "aaa.log").write_text("a" * 4000 + "\n" + "a" * 30 + "b\n")
    started = time.perf_counter()
    result = await asyncio.wait_for(
        sandbox.call("grep_log", {"path": str(sandbox.root / "aaa.log"), "pattern": EVIL}), 20)
    assert time.perf_counter() - started < 2
    assert result.status == "ok" and result.content.startswith("1 lines match")
    nested = await sandbox.call("tail_log", {"path": str(sandbox.root / "aaa.log"), "contains": "(a+)+c$",
                                            "regex": True})
    assert nested.status == "ok" and "No lines" in nested.content  # was refused; now just fast


async def test_patterns_re2_cannot_run_are_one_clear_sentence(sandbox: Sandbox):
    log = str(sandbox.root / "error.log")
    cases = {
        "(unclosed": "missing )",
        "(?=upstream)x": "lookahead and lookbehind",
        r"(a)\1": "backreferences",
        "a{1000}{1000}": "not a valid regular expression",
    }
    for pattern, says in cases.items():
        result = await sandbox.call("grep_log", {"path": log, "pattern": pattern})
        assert result.status == "error", pattern
        assert result.content.startswith("Error: the pattern is not a valid regular expression (RE2 syntax)")
        assert says in result.content, result.content
    ok = await sandbox.call("grep_log", {"path": log, "pattern": r"^\d{4}/\d\d/\d\d .*\b502$",
                                         "ignore_case": True})
    assert ok.content.startswith("2 lines match")


def _open_fds_on(path: Path) -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}") == str(path)
        except OSError:
            continue
    return n


async def test_a_scan_that_timed_out_stops_reading(tmp_path: Path):
    root = tmp_path / "logs"
    root.mkdir()
    big = root / "big.log"
    line = b"2024/05/01 10:00:00 [error] zzz upstream timed out while reading 502\n"
    with big.open("wb") as fh:
        for _ in range(64):
            fh.write(line * (1024 * 1024 // len(line)))
    agents = tmp_path / "agents"
    write_agent(agents, "sbx", policy(root).replace("  grep_log:\n    roots: *r",
                                                   "  grep_log:\n    roots: *r\n    timeout: 0.2"))
    sbx = Sandbox(tmp_path, root, tmp_path, big, ProfileLoader(agents, builtin_tools()).load("sbx"))
    result = await sbx.call("grep_log", {"path": str(big), "pattern": "zzz", "since": "100000d"})
    assert result.status == "error" and "timed out after 0.2 s" in result.content
    deadline = time.monotonic() + 1.0
    while _open_fds_on(big) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert _open_fds_on(big) == 0, "a worker thread is still reading the log after the tool gave up"


def test_ask_exits_after_an_exponential_pattern(tmp_path: Path, fake_llm: FakeOpenAI):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").write_text("a" * 4000 + "\n")
    agent = tmp_path / "agents" / "ops"
    agent.mkdir(parents=True)
    (agent / "AGENT.md").write_text(f"---\ntools:\n  grep_log: {{roots: ['{logs}']}}\n---\nYou are ops.\n")
    fake_llm.calls(call("grep_log", {"path": str(logs / "a.log"), "pattern": EVIL}))
    fake_llm.reply("No b.")
    started = time.monotonic()
    out = yokebot("ask", "--agent", "ops", "any b?", env=base_env(tmp_path, fake_llm))
    assert out.returncode == 0, out.stderr
    assert "No b." in out.stdout and time.monotonic() - started < 30
