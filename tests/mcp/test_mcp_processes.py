"""`yokebot run` and `yokebot chat` as real processes start their stdio MCP servers and leave no process
behind when they stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import free_port, write_agent
from tests.mcp.conftest import stdio_server
from tests.observability.test_run import fetch


def children(pid: int) -> list[int]:
    """Processes whose parent is `pid` and that run the fake MCP server."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == pid and b"mcp_server.py" in cmdline:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert proc.poll() is None, f"yokebot exited early: {proc.stderr.read() if proc.stderr else ''}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def environment(tmp_path: Path, fake_llm: FakeOpenAI, **extra: str) -> dict[str, str]:
    agents = tmp_path / "agents"
    write_agent(agents, "ops", "description: ops\nmcp:" + stdio_server("[echo, pid]"))
    return {**os.environ, "YOKEBOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'y.db'}",
            "YOKEBOT_AGENTS_DIR": str(agents), "OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": "sk-x",
            "YOKEBOT_DEFAULT_AGENT": "ops", **extra}


def test_run_starts_the_servers_shows_them_and_leaves_no_orphan_on_sigterm(tmp_path: Path, fake_llm: FakeOpenAI):
    port = free_port()
    env = environment(tmp_path, fake_llm, YOKEBOT_HTTP_PORT=str(port))
    proc = subprocess.Popen([sys.executable, "-m", "bot", "run"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def mcp_up() -> bool:
            try:
                status, body = fetch(f"http://127.0.0.1:{port}/readyz")
            except OSError:
                return False
            return status == 200 and json.loads(body).get("mcp", {}).get("ops", {}).get("state") == "up"

        wait_for(mcp_up, 40, "the MCP server up in /readyz", proc)
        servers = children(proc.pid)
        assert len(servers) == 1
        _, metrics = fetch(f"http://127.0.0.1:{port}/metrics")
        assert 'yokebot_mcp_server_up{server="ops"} 1.0' in metrics
        assert 'yokebot_mcp_server_tools{server="ops"} 2.0' in metrics
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert not alive(servers[0]), "the MCP server outlived yokebot run"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_chat_starts_the_servers_and_leaves_no_orphan_when_it_ends(tmp_path: Path, fake_llm: FakeOpenAI):
    proc = subprocess.Popen([sys.executable, "-m", "bot", "chat"], env=environment(tmp_path, fake_llm), cwd=tmp_path,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        servers = wait_for(lambda: children(proc.pid), 40, "the MCP server process", proc)
        time.sleep(0.5)
        assert proc.stdin is not None
        proc.stdin.write("/exit\n")
        proc.stdin.flush()
        assert proc.wait(30) == 0
        assert not alive(servers[0]), "the MCP server outlived yokebot chat"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
