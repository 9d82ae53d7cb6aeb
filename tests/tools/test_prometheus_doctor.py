"""`yokebot doctor` checks each Prometheus the agents name: a real one is ready, a dead port and a server
that is no Prometheus are failures that say what to fix, and a header's missing variable is named."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from tests.fakes.loopback import LoopbackServer
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.prometheus import PrometheusProcess
from tests.helpers import free_port, write_agent
from tests.test_cli import base_env, yokebot


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    with PrometheusProcess.start(tmp_path_factory.mktemp("prom")) as p:
        yield p


def agent(tmp_path: Path, name: str, url: str, extra: str = "") -> None:
    write_agent(tmp_path / "agents", name, f'description: {name}\ntools:\n  prometheus_query: {{url: "{url}"{extra}}}\n'
                f'  prometheus_alerts: {{url: "{url}"{extra}}}\n')


def test_doctor_checks_each_configured_prometheus(tmp_path: Path, fake_llm: FakeOpenAI, prom: PrometheusProcess):
    fake_llm.models = ["cli-model"]
    dead = f"http://127.0.0.1:{free_port()}"
    app = web.Application()
    app.router.add_get("/api/v1/query", lambda r: web.Response(status=401, text="no"))
    other = LoopbackServer(app).start()
    agent(tmp_path, "ops", prom.url)
    agent(tmp_path, "db", prom.url)
    agent(tmp_path, "edge", dead)
    agent(tmp_path, "auth", other.url, ', headers: {Authorization: "Bearer ${PROM_DOCTOR_TOKEN}"}')
    env = base_env(tmp_path, fake_llm) | {"YOKEBOT_DEFAULT_AGENT": "ops"}
    try:
        out = yokebot("doctor", env=env)
        with_token = yokebot("doctor", env=env | {"PROM_DOCTOR_TOKEN": "tok-prom-123456"})
    finally:
        other.stop()
    text = " ".join(out.stdout.split())
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 1
    assert f"✓ prometheus {prom.url}: ready (used by db, ops)" in text
    assert f"✗ prometheus {dead}: cannot reach Prometheus at {dead}" in text
    assert "fix: check url: and headers: of prometheus_query in edge" in text
    assert (f"✗ prometheus {other.url}: the Prometheus settings need the environment variable PROM_DOCTOR_TOKEN, "
            "which is not set") in text
    text = " ".join(with_token.stdout.split())
    assert f"✗ prometheus {other.url}: GET /-/ready and /api/v1/query answered HTTP 401" in text
    assert "tok-prom" not in with_token.stdout + with_token.stderr
