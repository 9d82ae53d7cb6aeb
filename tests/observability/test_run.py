"""`yokebot run` as a real process: Prometheus can scrape it, /readyz answers, logs are JSON lines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import free_port, write_agent


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_run_serves_healthz_readyz_and_metrics(tmp_path: Path, fake_llm: FakeOpenAI):
    agents = tmp_path / "agents"
    write_agent(agents, "ops", "description: ops\ntools: [current_time]")
    port = free_port()
    secret = "sk-live-secret-abcdef123456"
    env = {**os.environ, "YOKEBOT_HTTP_PORT": str(port), "YOKEBOT_DATABASE_URL":
           f"sqlite+aiosqlite:///{tmp_path / 'y.db'}", "YOKEBOT_AGENTS_DIR": str(agents),
           "OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": secret, "YOKEBOT_LOG_FORMAT": "json",
           "YOKEBOT_DEFAULT_AGENT": "ops"}
    proc = subprocess.Popen([sys.executable, "-m", "bot", "run"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if fetch(f"http://127.0.0.1:{port}/healthz")[0] == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "yokebot run did not come up"
            time.sleep(0.1)
        status, body = fetch(f"http://127.0.0.1:{port}/readyz")
        ready = json.loads(body)
        assert status == 200 and {k: ready[k] for k in ("status", "database", "adapters")} == {
            "status": "ready", "database": "ok", "adapters": {}}
        assert "nothing will answer chats" in ready["warning"]  # no chat platform configured: said, not hidden
        status, body = fetch(f"http://127.0.0.1:{port}/metrics")
        assert status == 200
        for name in ("yokebot_turns_total", "yokebot_model_tokens_total", "yokebot_tool_calls_total",
                     "yokebot_turn_duration_seconds", "yokebot_adapter_events_total",
                     "yokebot_schedule_runs_total"):
            assert f"# TYPE {name} " in body
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 0, stderr
    records = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    assert any(r["message"].startswith("yokebot is running") for r in records)
    assert any(r["level"] == "WARNING" and "nothing will answer chats" in r["message"] for r in records)
    assert secret not in stderr
