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
            mcp_health_seconds=2.0, mcp_health_timeout_seconds=3.0)
TOKEN_ENV = "OPS_MCP_TOKEN"  # in yokebot's environment; the HTTP fake gets it as FAKE_MCP_TOKEN
TOKEN = "tok-upstream-7f3a9c"


def stdio_server(tools: str, *extra: str, env: str = "") -> str:
    """The `mcp:` entry of an agent for the fake server over stdio."""
    args = ", ".join(f'"{a}"' for a in (str(FAKE), "stdio", *extra))
    env_line = f"\n    env: {env}" if env else ""
    return f"""
  ops:
    command: {sys.executable}
    args: [{args}]{env_line}
    read: ["{FAKE.parent}"]
    timeout: 5
    tools: {tools}"""


def http_server_entry(url: str, tools: str) -> str:
    return f"""
  ops:
    url: {url}
    headers: {{Authorization: "Bearer ${{{TOKEN_ENV}}}"}}
    timeout: 5
    tools: {tools}"""


class HttpServer:
    """The fake server over streamable HTTP in a child process (stopped and restarted on the same port);
    it answers 401 unless sent `Authorization: Bearer <TOKEN>`."""

    def __init__(self, tmp: Path, *extra: str) -> None:
        self.tmp, self.extra = tmp, extra
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> HttpServer:
        port_file = self.tmp / f"mcp-port-{time.monotonic_ns()}"
        self.proc = subprocess.Popen(
            [sys.executable, str(FAKE), "http", "--port", str(self.port), "--port-file", str(port_file),
             "--require-token-env", "FAKE_MCP_TOKEN", *self.extra],
            env={**os.environ, "FAKE_MCP_TOKEN": TOKEN})
        deadline = time.monotonic() + 20
        while not port_file.exists():
            assert self.proc.poll() is None and time.monotonic() < deadline, "the fake MCP server did not start"
            time.sleep(0.05)
        self.port = int(port_file.read_text())
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


class Servers:
    """One transport's way to declare the fake server; HTTP keeps its process here."""

    def __init__(self, transport: str, tmp: Path) -> None:
        self.transport, self.tmp = transport, tmp
        self.http: HttpServer | None = None

    def entry(self, tools: str, *extra: str) -> str:
        if self.transport == "stdio":
            return stdio_server(tools, *extra, env=f'{{FAKE_MCP_TOKEN: "${{{TOKEN_ENV}}}"}}')
        if self.http is None:
            self.http = HttpServer(self.tmp, *extra).start()
        return http_server_entry(self.http.url, tools)

    def stop(self) -> None:
        if self.http is not None:
            self.http.stop()


@pytest.fixture(params=["stdio", "http"])
def servers(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    s = Servers(request.param, tmp_path)
    yield s
    s.stop()
