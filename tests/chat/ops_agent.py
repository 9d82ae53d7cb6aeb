"""The shipped `ops` agent (agents/ops: AGENT.md, runbook, skill) for the end-to-end chat tests, with its log
roots moved into tmp_path, and an nginx error log there that has 502s in it."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import copy_shipped_ops

REPO = Path(__file__).resolve().parents[2]
SHIPPED_TARGET = "slack:#ops-alerts"
NGINX_502 = (
    "2024/05/01 09:58:00 [notice] 1#1: signal process started\n"
    "2024/05/01 10:00:01 [error] 7#7: *101 upstream prematurely closed connection while reading response "
    'header from upstream, client: 10.0.0.5, upstream: "http://10.0.0.7:8080/api", HTTP/1.1 502\n'
    "2024/05/01 10:00:04 [error] 7#7: *102 connect() failed (111: Connection refused) while connecting to "
    'upstream, upstream: "http://10.0.0.7:8080/api", HTTP/1.1 502\n'
    "2024/05/01 10:00:07 [error] 7#7: *103 upstream timed out (110: Connection timed out) while reading "
    'response header from upstream, upstream: "http://10.0.0.7:8080/api", HTTP/1.1 502\n'
)


def nginx_logs(tmp_path: Path) -> Path:
    logs = tmp_path / "nginx"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "error.log").write_text(NGINX_502)
    return logs


def shipped_ops(agents: Path, logs: Path, *, front: str = "", notify_to: str | None = None) -> Path:
    """Copy agents/ops into `agents`, its roots pointed at `logs`. `front` adds front-matter lines (routing,
    access lists); `notify_to` replaces the shipped notify target (slack:#ops-alerts)."""
    md = copy_shipped_ops(agents)
    text = md.read_text()
    assert text.count("/var/log/nginx") == 1 and SHIPPED_TARGET in text, "the shipped ops agent changed"
    text = text.replace("/var/log/nginx", str(logs))
    if notify_to is not None:
        text = text.replace(SHIPPED_TARGET, notify_to)
    if front:
        text = text.replace("---\n", f"---\n{front.strip()}\n", 1)
    md.write_text(text)
    return md
