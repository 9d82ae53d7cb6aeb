"""A real Prometheus (`/usr/bin/prometheus`) on a free 127.0.0.1 port, scraping itself every second, with
optional alerting rules: for tests of the Prometheus tools and of alert handling. Not a fake server: the
binary itself, in a temporary folder, stopped (and its data removed) by `stop()`.

    with PrometheusProcess.start(tmp, rules=FIRING_RULE) as prom:   # waits for /-/ready and a first scrape
        prom.url                                                    # http://127.0.0.1:PORT

Tests skip with a reason when the binary is missing, unless YOKEBOT_REQUIRE_PROMETHEUS=1 (set by .ci/run)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from tests.helpers import free_port

BINARY = shutil.which("prometheus") or "/usr/bin/prometheus"
REQUIRE = os.environ.get("YOKEBOT_REQUIRE_PROMETHEUS") == "1"
START_SECONDS = 60.0  # generous: two cores shared by many test runs

# An alert that fires at the first rule evaluation (vector(1), for: 0s).
FIRING_RULE = """
groups:
  - name: test
    interval: 1s
    rules:
      - alert: DiskAlmostFull
        expr: vector(1)
        for: 0s
        labels: {severity: critical, instance: "db-1:9100"}
        annotations: {summary: "Disk /var on db-1 is 97% full"}
      - alert: TargetSlow
        expr: vector(1)
        for: 1h
        labels: {severity: warning}
        annotations: {summary: "pending for an hour before it fires"}
"""


def need_prometheus() -> str:
    """The binary's path, or skip (fail under YOKEBOT_REQUIRE_PROMETHEUS=1)."""
    if os.access(BINARY, os.X_OK):
        return BINARY
    if REQUIRE:
        pytest.fail(f"Prometheus is required (YOKEBOT_REQUIRE_PROMETHEUS=1) but {BINARY} is missing; "
                    "apt-get install prometheus")
    pytest.skip(f"{BINARY} is not installed (apt-get install prometheus)")


def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


@dataclass
class PrometheusProcess:
    url: str
    folder: Path
    process: subprocess.Popen[bytes]

    @classmethod
    def start(cls, folder: Path, rules: str | None = None, wait_for_alerts: bool = False) -> PrometheusProcess:
        binary = need_prometheus()
        folder.mkdir(parents=True, exist_ok=True)
        port = free_port()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "self", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}],
        }
        if rules is not None:
            (folder / "rules.yml").write_text(rules)
            config["rule_files"] = [str(folder / "rules.yml")]
        (folder / "prom.yml").write_text(json.dumps(config))  # JSON is YAML
        log = (folder / "prometheus.log").open("wb")
        process = subprocess.Popen(
            [binary, f"--config.file={folder / 'prom.yml'}", f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        prom = cls(f"http://127.0.0.1:{port}", folder, process)
        try:
            prom._wait(wait_for_alerts)
        except BaseException:
            prom.stop()
            raise
        return prom

    def _wait(self, wait_for_alerts: bool) -> None:
        """Ready, a first scrape stored (`up` has a sample) and, if asked, a rule evaluated into a firing alert."""
        deadline = time.monotonic() + START_SECONDS
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited ({self.process.returncode}): {self.log_tail()}")
            if self._settled(wait_for_alerts):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"prometheus at {self.url} was not ready within {START_SECONDS:g} s: "
                                   f"{self.log_tail()}")
            time.sleep(0.1)

    def _settled(self, wait_for_alerts: bool) -> bool:
        try:
            up = get_json(f"{self.url}/api/v1/query?query=up")
            if not up["data"]["result"]:
                return False
            if wait_for_alerts:
                alerts = get_json(f"{self.url}/api/v1/alerts")["data"]["alerts"]
                return any(a["state"] == "firing" for a in alerts)
            return True
        except (OSError, urllib.error.URLError, ValueError, KeyError):
            return False

    def log_tail(self) -> str:
        try:
            return (self.folder / "prometheus.log").read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.folder / "data", ignore_errors=True)

    def __enter__(self) -> PrometheusProcess:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
