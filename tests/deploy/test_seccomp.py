"""deploy/seccomp/yokebot-bwrap.json, loaded the way a container runtime loads it (libseccomp, default deny):
bubblewrap makes the shell tool's sandbox under it, each system call it adds for bubblewrap is needed (dropped,
bwrap fails), what it leaves out is refused, and a whole `yokebot ask` turn whose shell command runs in bwrap
works under it. Skipped where the system Python has no libseccomp bindings (python3-seccomp) or bwrap cannot
make a sandbox here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.tools.isolation import probe, sandboxed
from tests.fakes.openai_server import FakeOpenAI, call
from tests.test_cli import base_env

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "deploy" / "seccomp" / "yokebot-bwrap.json"
LOADER = Path(__file__).with_name("seccomp_load.py")
SYSTEM_PYTHON = "/usr/bin/python3"
BWRAP_GROUP = ["clone", "mount", "umount2", "pivot_root"]


def _why_not() -> str | None:
    if not os.path.exists(SYSTEM_PYTHON) or subprocess.run([SYSTEM_PYTHON, "-c", "import seccomp"],
                                                           capture_output=True).returncode != 0:
        return "the system Python has no libseccomp bindings (apt-get install python3-seccomp)"
    if not probe().available:
        return f"bubblewrap makes no sandbox here: {probe().detail}"
    return None


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))


def under_profile(argv: list[str], *, drop: list[str] = (), profile: Path = PROFILE,  # type: ignore[assignment]
                  env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    extra = ["--drop", ",".join(drop)] if drop else []
    return subprocess.run([SYSTEM_PYTHON, str(LOADER), str(profile), *extra, "--", *argv], capture_output=True,
                          text=True, timeout=60, env=env)


def the_sandbox(tmp_path: Path, *argv: str) -> list[str]:
    """The bwrap command line the shell tool runs, with `tmp_path` as the root it may read."""
    (tmp_path / "error.log").write_text("502 upstream timed out\n")
    bwrap = "/usr/bin/bwrap"
    return sandboxed(bwrap, list(argv), [str(tmp_path)], str(tmp_path), {"PATH": "/usr/bin:/bin"})


def test_the_profile_is_default_deny_with_three_documented_groups():
    profile = json.loads(PROFILE.read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO" and profile["defaultErrnoRet"] == 1
    everyday, bubblewrap, clone3 = profile["syscalls"]
    assert bubblewrap["names"] == BWRAP_GROUP and bubblewrap["action"] == "SCMP_ACT_ALLOW"
    assert clone3 == {"comment": clone3["comment"], "names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}
    refused = {"ptrace", "bpf", "keyctl", "init_module", "kexec_load", "setns", "unshare", "open_by_handle_at",
               "perf_event_open", "process_vm_readv", "chroot", "io_uring_setup", "reboot", "clock_settime"}
    assert not refused & set(everyday["names"]) and not refused & set(BWRAP_GROUP)
    assert all(g["comment"] for g in profile["syscalls"])
    assert "SCMP_ARCH_X86_64" in profile["architectures"] and "SCMP_ARCH_AARCH64" in profile["architectures"]


def test_bubblewrap_makes_the_shell_sandbox_under_the_profile(tmp_path: Path):
    ran = under_profile(the_sandbox(tmp_path, "/usr/bin/grep", "-c", "502", str(tmp_path / "error.log")))
    assert ran.returncode == 0 and ran.stdout.strip() == "1", ran.stderr


@pytest.mark.parametrize("syscall", BWRAP_GROUP)
def test_each_system_call_added_for_bubblewrap_is_needed(tmp_path: Path, syscall: str):
    ran = under_profile(the_sandbox(tmp_path, "/usr/bin/true"), drop=[syscall])
    assert ran.returncode != 0
    assert "Operation not permitted" in ran.stderr or "No permissions to create new namespace" in ran.stderr, ran.stderr


def test_what_the_profile_leaves_out_is_refused():
    ran = under_profile(["/usr/bin/unshare", "--user", "/usr/bin/true"])  # unshare(2): bwrap uses clone instead
    assert ran.returncode != 0 and "Operation not permitted" in ran.stderr
    assert under_profile(["/usr/bin/true"]).returncode == 0


def test_a_yokebot_turn_runs_under_the_profile_with_its_shell_command_in_bubblewrap(tmp_path: Path,
                                                                                   fake_llm: FakeOpenAI):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "error.log").write_text("2026/11/30 08:00:01 [error] upstream timed out (110) 502\n")
    agent = tmp_path / "agents" / "ops"
    agent.mkdir(parents=True)
    (agent / "AGENT.md").write_text(f"""---
tools:
  shell:
    roots: ['{logs}']
    isolation: required
    commands:
      - command: grep
        flags: {{"-c": null}}
        args: [text, "path..."]
---
You are ops.
""")
    fake_llm.calls(call("shell", {"command": f"grep -c 502 {logs / 'error.log'}"})).reply("One 502.")
    env = base_env(tmp_path, fake_llm) | {"YOKEBOT_DEFAULT_AGENT": "ops"}
    ran = under_profile([sys.executable, "-m", "bot", "ask", "--json", "how many 502s?"], env=env)
    assert ran.returncode == 0, ran.stderr[-2000:]
    out = json.loads(ran.stdout)
    assert out["answer"] == "One 502."
    [tool] = out["tool_calls"]
    assert tool["status"] == "ok" and "1" in tool["result"], tool
