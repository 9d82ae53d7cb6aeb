"""Fixtures for the tool tests: a sandbox in tmp_path (an allowed root with logs, a canary outside it), an
agent profile whose policy allows that root, and a ToolExecutor whose results are recorded as the loop reports them."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.chat.core.notifier import AdapterNotifier
from bot.engine.messages import Scope, ToolCall, ToolResult
from bot.engine.run.context import RunContext
from bot.engine.run.executor import ToolExecutor
from bot.engine.spec.profiles import AgentProfile, ProfileLoader
from bot.engine.testing import RecordingHooks
from bot.redact import SecretRedactor
from bot.tools import builtin_tools
from tests.helpers import write_agent

CANARY = "CANARY-7f3a-do-not-leak"
_ids = itertools.count(1)


def policy(root: Path, extra_commands: str = "") -> str:
    return f"""
description: sandbox test agent
tools:
  read_file:
    roots: &r [{root}]
    max_bytes: 4096
  tail_log:
    roots: *r
  grep_log:
    roots: *r
  shell:
    roots: *r
    isolation: preferred  # in the OS sandbox where bubblewrap works (tests/tools/test_isolation.py)
    command_timeout: 5
    max_output_bytes: 4096
    commands:
      - command: tail
        flags: {{"-n": int, "-q": null}}
        args: ["path..."]
      - command: grep
        flags: {{"-i": null, "-c": null, "-n": null, "-E": null, "-m": int}}
        args: [text, "path..."]
      - command: grep -r
        args: [text, "path..."]
      - command: ls
        flags: {{"-l": null, "-a": null}}
        args: ["path*"]
      - command: journalctl -u nginx
        flags: {{"--no-pager": null, "-n": int, "--since": text}}
      - command: systemctl status nginx
      - command: df -h
      - command: uptime
      - command: echo
        args: ["text*"]
{extra_commands}
  notify: {{max_per_reply: 50, max_per_turn: 50}}  # one turn, one reply here: tests/tools/test_notify_limits.py
  remember: {{}}
  forget: {{}}
notify:
  default: "slack:#ops-alerts"
  allowed: ["slack:#ops-alerts", "slack:#ops-oncall"]
  dedup_window_seconds: 600
"""


class RecordingChat:
    """A chat adapter that only records what notify posts (the Slack adapter plugs in the same way)."""

    def __init__(self, platform: str = "slack") -> None:
        self.platform = platform
        self.posts: list[tuple[str, str]] = []
        self.within: list[Any] = []  # the turn's conversation handed with each post (its thread, if the channel)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, message: Any) -> str:
        raise AssertionError("notify must use post(), not send()")

    async def post(self, channel: str, text: str, within: Any = None) -> str:
        self.posts.append((channel, text))
        self.within.append(within)
        return f"{self.platform}-msg-{len(self.posts)}"


def snapshot(*dirs: Path) -> dict[str, str]:
    """Every file and link under dirs with a hash of its content: proof that nothing was changed."""
    out: dict[str, str] = {}
    for d in dirs:
        for base, subdirs, files in os.walk(d):
            for name in [*subdirs, *files]:
                p = Path(base) / name
                if p.is_symlink():
                    out[str(p)] = "link:" + os.readlink(p)
                elif p.is_file() and not name.startswith("fifo"):
                    out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
                else:
                    out[str(p)] = "dir-or-special"
    return out


@dataclass
class Sandbox:
    tmp: Path
    root: Path
    outside: Path
    canary: Path
    profile: AgentProfile
    audit: RecordingHooks = field(default_factory=RecordingHooks)  # what the loop reports to the recorder
    chat: RecordingChat = field(default_factory=RecordingChat)
    memory: Any = None
    channel: str = "C-ops"

    def executor(self) -> ToolExecutor:
        return ToolExecutor(self.registry, redact=SecretRedactor(["sk-configured-secret-value"]))

    def run_context(self) -> RunContext:
        notifier = AdapterNotifier()
        notifier.register(self.chat)  # type: ignore[arg-type]
        return RunContext(
            "s1", "t1", self.profile, Scope("slack", self.channel, "th1", "U1"), "mention", notifier, self.memory
        )

    async def call(
        self, tool: str, args: dict[str, Any] | str, executor: ToolExecutor | None = None
    ) -> ToolResult:
        raw = args if isinstance(args, str) else json.dumps(args)
        ex = executor or self._executor
        run = self.run_context()
        result = await ex.execute(ToolCall(f"call_{next(_ids)}", tool, raw), run)
        await self.audit.tool_finished(run, result)  # as the loop does: the hooks get the result the model gets
        return result

    def __post_init__(self) -> None:
        self.registry = builtin_tools()
        self._executor = self.executor()


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    root = tmp_path / "logs"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    canary = outside / "canary.txt"
    canary.write_text(f"{CANARY}\nroot:x:0:0:root:/root:/bin/bash\n")
    (root / "error.log").write_text(
        "2024/05/01 10:00:00 [error] 11#11: *1 upstream prematurely closed connection, HTTP/1.1 502\n"
        "2024/05/01 10:00:05 [error] 11#11: *2 connect() failed (111: Connection refused), HTTP/1.1 502\n"
    )
    (root / "access.log").write_text('10.0.0.1 - - [01/May/2024:10:00:00 +0000] "GET / HTTP/1.1" 502 0\n')
    (root / "evil").symlink_to(canary)
    (root / "evil_dir").symlink_to(outside, target_is_directory=True)
    (root / "proc_link").symlink_to("/proc/self/environ")
    (root / "zero").symlink_to("/dev/zero")
    os.link(canary, root / "hard")
    os.mkfifo(root / "fifo")
    sibling = tmp_path / "logs_evil"  # shares the root's name as a prefix
    sibling.mkdir()
    (sibling / "canary.txt").write_text(CANARY)
    agents = tmp_path / "agents"
    write_agent(agents, "sbx", policy(root))
    profile = ProfileLoader(agents, builtin_tools()).load("sbx")
    return Sandbox(tmp_path, root, outside, canary, profile)
