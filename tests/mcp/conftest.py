"""MCP test fixtures: the fake MCP server (tests/fakes/mcp_server.py, the SDK's own server API) over stdio or
streamable HTTP, and agents that declare it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "mcp_server.py"
FAST = dict(mcp_startup_seconds=15, mcp_backoff_base_seconds=0.2, mcp_backoff_max_seconds=1.0,
            mcp_health_seconds=0.5, mcp_health_timeout_seconds=1.0)


def stdio_server(tools: str, *extra: str, env: str = "") -> str:
    """The `mcp:` entry of an agent for the fake server over stdio."""
    args = ", ".join(f'"{a}"' for a in (str(FAKE), "stdio", *extra))
    env_line = f"\n    env: {env}" if env else ""
    return f"""
  ops:
    command: {sys.executable}
    args: [{args}]{env_line}
    timeout: 5
    tools: {tools}"""


class HttpServer:
    """The fake server over streamable HTTP in a child process (stopped and restarted on the same port)."""

    def __init__(self, tmp: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.tmp, self.extra, self.env = tmp, extra, env or {}
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> HttpServer:
        port_file = self.tmp / f"mcp-port-{time.monotonic_ns()}"
        self.proc = subprocess.Popen(
            [sys.executable, str(FAKE), "http", "--port", str(self.port), "--port-file", str(port_file), *self.extra],
            env={**os.environ, **self.env})
        deadline = time.monotonic() + 20
        while not port_file.exists():
            assert self.proc.poll() is None and time.monotonic() < deadline, "the fake MCP server did not start"
            time.sleep(0.05)
        self.port = int(port_file.read_text())
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HttpServer]:
    server = HttpServer(tmp_path).start()
    yield server
    server.stop()
