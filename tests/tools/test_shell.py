"""shell with real processes: output, exit codes, a hang (killed with its children), a flood, a clean env."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from bot.engine.spec.profiles import ProfileLoader
from bot.tools import builtin_tools
from tests.helpers import write_agent
from tests.tools.conftest import Sandbox, policy


def with_commands(sandbox: Sandbox, commands: str) -> Sandbox:
    """The sandbox with extra shell rules (pinned test commands an admin might allow)."""
    agents = sandbox.tmp / "agents"
    write_agent(
        agents, "sbx2", policy(sandbox.root, commands).replace("command_timeout: 5", "command_timeout: 1")
    )
    sandbox.profile = ProfileLoader(agents, builtin_tools()).load("sbx2")
    return sandbox


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


async def test_an_allowed_command_runs_and_reports_its_exit_code(sandbox: Sandbox):
    log = sandbox.root / "error.log"
    result = await sandbox.call("shell", {"command": f"tail -n 1 {log}"})
    assert result.status == "ok"
    assert result.content.splitlines() == [
        f"$ tail -n 1 {log}",
        "[exit code 0]",
        "2024/05/01 10:00:05 [error] 11#11: *2 connect() failed (111: Connection refused), HTTP/1.1 502",
    ]
    result = await sandbox.call("shell", {"command": f"grep -c 'HTTP/1.1 50[234]' {log}"})
    assert result.content.splitlines()[1:] == ["[exit code 0]", "2"]
    result = await sandbox.call("shell", {"command": f"grep -c nomatch {log}"})
    assert result.status == "ok" and result.content.splitlines()[1:] == ["[exit code 1]", "0"]


async def test_quoted_operators_are_plain_arguments(sandbox: Sandbox):
    log = sandbox.root / "error.log"
    result = await sandbox.call("shell", {"command": f"grep -E 'prematurely|refused' {log}"})
    assert result.status == "ok" and result.content.count("HTTP/1.1 502") == 2
    result = await sandbox.call("shell", {"command": "echo 'a; rm -rf b' \"c && d\" 'cost $5'"})
    assert result.content.splitlines()[-1] == "a; rm -rf b c && d cost $5"


async def test_symlink_inside_the_root_is_passed_resolved(sandbox: Sandbox):
    (sandbox.root / "current.log").symlink_to(sandbox.root / "error.log")
    result = await sandbox.call("shell", {"command": f"tail -n 1 {sandbox.root}/current.log"})
    assert result.content.splitlines()[0] == f"$ tail -n 1 {sandbox.root}/error.log"


def sleepers(mark: str) -> list[int]:
    """Live processes running `sleep <mark>`, found from the host (a sandboxed one has its own PID inside,
    and cannot write a pid file into a read-only root)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes() == f"sleep\0{mark}\0".encode():
                found.append(int(entry.name))
        except OSError:
            continue
    return [pid for pid in found if alive(pid)]


async def gone(mark: str) -> bool:
    for _ in range(50):
        if not sleepers(mark):
            return True
        await asyncio.sleep(0.02)
    return False


async def test_a_hanging_command_is_killed_at_the_timeout_with_its_children(sandbox: Sandbox):
    hang = "sh -c 'sleep 31.4101 & sleep 30'"
    with_commands(sandbox, f'      - command: "{hang}"\n')
    started = time.perf_counter()
    result = await sandbox.call("shell", {"command": hang})
    elapsed = time.perf_counter() - started
    assert result.status == "ok"
    assert "[timed out after 1 s: the command and its child processes were killed]" in result.content
    assert 0.9 < elapsed < 4
    assert await gone("31.4101"), "the background child survived"


async def test_a_child_left_behind_by_a_finished_command_is_killed(sandbox: Sandbox):
    quick = "sh -c 'sleep 31.4102 > /dev/null 2>&1 &'"
    with_commands(sandbox, f'      - command: "{quick}"\n')
    result = await sandbox.call("shell", {"command": quick})
    assert "[exit code 0]" in result.content
    assert await gone("31.4102")


async def test_a_flood_of_output_is_cut_and_stopped(sandbox: Sandbox):
    with_commands(sandbox, '      - command: "yes"\n        args: [text]\n')
    started = time.perf_counter()
    result = await sandbox.call("shell", {"command": "yes flood"})
    assert time.perf_counter() - started < 2
    assert result.status == "ok"
    assert "[output cut after 4096 bytes: the command was stopped; narrow it down]" in result.content
    assert result.content.endswith("[output cut after 4096 bytes]")
    assert result.content.count("flood\n") == 4096 // len("flood\n") + 1  # the shown command line too


async def test_the_child_gets_a_clean_environment_and_no_stdin(sandbox: Sandbox, monkeypatch):
    monkeypatch.setenv("YOKEBOT_TEST_SECRET", "sk-configured-secret-value")
    with_commands(sandbox, "      - command: env\n      - command: cat\n")
    result = await sandbox.call("shell", {"command": "env"})
    env = dict(line.split("=", 1) for line in result.content.splitlines()[2:])
    assert "YOKEBOT_TEST_SECRET" not in env and env["PATH"].startswith("/usr/local/sbin")
    assert set(env) <= {
        "PATH",
        "LANG",
        "LC_ALL",
        "TERM",
        "PAGER",
        "SYSTEMD_PAGER",
        "SYSTEMD_COLORS",
        "NO_COLOR",
        "HOME",
        "PWD",
    }
    started = time.perf_counter()
    result = await sandbox.call("shell", {"command": "cat"})  # would wait forever on a real stdin
    assert time.perf_counter() - started < 1 and result.content.splitlines()[1:] == [
        "[exit code 0]",
        "(no output)",
    ]


async def test_a_program_that_is_not_installed_is_a_clear_error(sandbox: Sandbox):
    with_commands(sandbox, "      - command: definitely-not-installed-tool\n")
    result = await sandbox.call("shell", {"command": "definitely-not-installed-tool"})
    assert result.status == "error" and "is not installed on this host" in result.content


async def test_secrets_in_command_output_are_redacted_before_model_and_audit(sandbox: Sandbox):
    secret_file = sandbox.root / "app.conf"
    secret_file.write_text(
        "db_password = hunter2hunter2\nAuthorization: Bearer abc.def.ghi\n"
        "slack xoxb-123456789012-abcdefghijkl\nkey sk-configured-secret-value\n"
    )
    result = await sandbox.call("shell", {"command": f"tail {secret_file}"})
    for leak in ("hunter2hunter2", "abc.def.ghi", "xoxb-123456789012", "sk-configured-secret-value"):
        assert leak not in result.content
        assert leak not in sandbox.audit.tool_results[-1].content
    assert result.content.count("[REDACTED]") == 4
    assert os.path.exists(secret_file)
