"""Shell commands run in an OS sandbox (bubblewrap): a race between the path check and the program's own
open, a symlink or a pinned path cannot reach outside the roots, since nothing outside is there. Where the
sandbox is not available, the profile's `isolation` decides, and `agents show` / `yokebot run` say which.
A hard link inside a folder given to a program is refused (the sandbox cannot tell it from a file)."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

import bot.tools.shell as shell_module
from bot.runner import log_isolation
from bot.tools.isolation import Availability, probe
from tests.test_cli import base_env, yokebot
from tests.tools.conftest import CANARY, Sandbox, policy

found = probe()
needs_bwrap = pytest.mark.skipif(
    not found.available, reason=f"SKIPPED: no OS sandbox on this host ({found.detail}); .ci/run installs it")


def use_policy(sandbox: Sandbox, extra: str = "", isolation: str = "preferred") -> None:
    from bot.engine.spec.profiles import ProfileLoader
    from bot.tools import builtin_tools
    from tests.helpers import write_agent

    text = policy(sandbox.root, extra).replace("isolation: preferred", f"isolation: {isolation}")
    write_agent(sandbox.tmp / "agents", "sbx", text)
    sandbox.profile = ProfileLoader(sandbox.tmp / "agents", builtin_tools()).load("sbx")


@needs_bwrap
async def test_the_symlink_swap_race_never_escapes_under_bwrap(sandbox: Sandbox):
    d = sandbox.root / "d"
    d.mkdir()
    (d / "f.log").write_text("inside\n")
    (sandbox.outside / "f.log").write_text(f"{CANARY}\n")
    stop = threading.Event()

    def swap() -> None:  # someone who can write in the root flips d between a folder and a symlink out
        parked = sandbox.root / "d.parked"
        while not stop.is_set():
            try:
                os.rename(d, parked)
                os.symlink(sandbox.outside, d)
                os.unlink(d)
                os.rename(parked, d)
            except OSError:
                continue

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    outcomes: list[str] = []
    try:
        for _ in range(60):
            result = await sandbox.call("shell", {"command": f"tail -n 1 {d / 'f.log'}"})
            outcomes.append("escape" if CANARY in result.content else result.status)
    finally:
        stop.set()
        swapper.join()
    assert outcomes.count("escape") == 0, outcomes
    assert len(outcomes) == 60


@needs_bwrap
async def test_a_program_sees_only_the_roots(sandbox: Sandbox):
    canary = sandbox.canary
    use_policy(sandbox, f'      - command: "cat {canary} /etc/shadow /proc/1/environ"\n'
                        '      - command: "ls -a / /tmp"\n')
    pinned = await sandbox.call("shell", {"command": f"cat {canary} /etc/shadow /proc/1/environ"})
    assert CANARY not in pinned.content and "No such file" in pinned.content  # a path the checks never saw
    assert "YOKEBOT" not in pinned.content and "OPENAI" not in pinned.content  # PID 1 is the sandbox's own
    listing = await sandbox.call("shell", {"command": "ls -a / /tmp"})
    top = set(listing.content.split("/tmp:")[0].split())
    assert {"usr", "proc", "tmp"} <= top and not top & {"root", "home", "var", "work", "boot"}
    in_tmp = set(listing.content.split("/tmp:")[1].split())
    assert in_tmp <= {".", "..", sandbox.tmp.parts[2]}  # a private /tmp: only the way down to the root


@pytest.mark.parametrize("isolation", ["required", "preferred"])
async def test_without_an_os_sandbox_the_profile_decides(sandbox: Sandbox, monkeypatch, isolation: str):
    monkeypatch.setattr(shell_module, "probe", lambda: Availability(False, "bubblewrap is not installed"))
    use_policy(sandbox, isolation=isolation)
    result = await sandbox.call("shell", {"command": f"tail -n 1 {sandbox.root / 'error.log'}"})
    if isolation == "required":
        assert result.status == "denied"
        assert "must run in an OS sandbox and none is available on this host (bubblewrap is not installed)" \
            in result.content
        assert "isolation: preferred" in result.content
    else:
        assert result.status == "ok" and "HTTP/1.1 502" in result.content


async def test_a_hard_link_inside_a_folder_is_refused(sandbox: Sandbox):
    sub = sandbox.root / "sub"
    sub.mkdir()
    (sub / "ok.log").write_text("fine\n")
    os.link(sandbox.canary, sub / "innocent.log")
    use_policy(sandbox, '      - command: grep -r\n        args: [text, "path..."]\n')
    result = await sandbox.call("shell", {"command": f"grep -r CANARY {sub}"})
    assert result.status == "denied" and CANARY not in result.content
    assert "innocent.log (inside" in result.content and "several hard links" in result.content
    (sub / "innocent.log").unlink()
    clean = await sandbox.call("shell", {"command": f"grep -r fine {sub}"})
    assert clean.status == "ok" and "ok.log:fine" in clean.content


def test_a_host_command_may_take_no_path():
    from pydantic import ValidationError

    from bot.tools.commands import CommandRule

    assert CommandRule(command="df -h", host=True).host
    with pytest.raises(ValidationError, match="only for commands that take no path"):
        CommandRule(command="tail", args=("path...",), host=True)


def test_run_and_agents_show_say_how_shell_runs(sandbox: Sandbox, tmp_path: Path, caplog):
    with caplog.at_level(logging.INFO, logger="bot.runner"):
        log_isolation({"sbx": sandbox.profile})
    [record] = caplog.records
    assert record.getMessage().startswith("agent sbx: shell ")
    expected = "shell commands run isolated" if found.available else "WITHOUT isolation"
    assert expected in record.getMessage()

    env = base_env(tmp_path, None)
    env["YOKEBOT_AGENTS_DIR"] = str(sandbox.tmp / "agents")
    out = yokebot("agents", "show", "sbx", env={**env, "COLUMNS": "300"})
    assert out.returncode == 0, out.stderr
    assert f"shell: {expected}" in out.stdout or expected in out.stdout


SERVER_PROBE = """
import os, socket, sys
out = []
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).close(); out.append("net")
except OSError:
    out.append("no-net")
out.append("home" if os.path.exists(sys.argv[2]) else "no-home")
open(os.path.join(sys.argv[3], "written"), "w").write("x")
out.append(str(len([p for p in os.listdir("/proc") if p.isdigit()])))
print(" ".join(out))
"""


@needs_bwrap
@pytest.mark.parametrize("network", [True, False])
def test_a_server_sandbox_grants_its_files_and_network_only(tmp_path: Path, network: bool):
    """An MCP stdio server's sandbox: the network as its entry says, `write:` writable, nothing else of the
    host's files (the checkout's .env, a home directory), and only its own processes in /proc."""
    import socket
    import subprocess
    import sys

    from bot.tools.isolation import bwrap_path, server_sandbox

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    secret_dir = tmp_path / "home"
    secret_dir.mkdir()
    writable = tmp_path / "cache"
    writable.mkdir()
    argv = [sys.executable, "-c", SERVER_PROBE, str(listener.getsockname()[1]), str(secret_dir), str(writable)]
    bwrap = bwrap_path()
    assert bwrap is not None
    cmd = server_sandbox(bwrap, argv, "/", [], [str(writable)], network)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    listener.close()
    assert done.returncode == 0, done.stderr
    net, home, procs = done.stdout.split()
    assert net == ("net" if network else "no-net") and home == "no-home"
    assert int(procs) <= 3  # bwrap's init and the server: no process of the host
    assert (writable / "written").read_text() == "x"
