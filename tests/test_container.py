"""The container set-up: layered Dockerfile with pinned dependencies, a health check that follows
YOKEBOT_HTTP_PORT, bubblewrap for the sandbox, a compose file with PostgreSQL and the logs read-only. The image
build itself runs where a Docker daemon answers."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from bot.config import unknown_variables

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def instructions() -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_dependencies_are_installed_from_the_lock_before_the_code_is_copied():
    steps = instructions()
    lock_install = next(i for i, s in enumerate(steps) if "pip install" in s and "requirements.lock" in s)
    copy_code = next(i for i, s in enumerate(steps) if s.startswith("COPY bot"))
    assert lock_install < copy_code
    assert any("--no-deps ." in s for s in steps[copy_code:])  # the package itself adds nothing unpinned


def test_the_lock_pins_every_runtime_dependency_within_pyproject():
    import tomllib

    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.lower().replace("_", "-")] = version
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:
        req = Requirement(dep)
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"{name} is not pinned in requirements.lock (make lock)"
        assert req.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} violates {dep}"


def test_bubblewrap_is_installed_in_the_image():
    assert any(s.startswith("RUN") and "apt-get install" in s and "bubblewrap" in s for s in instructions())


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return None


def test_the_healthcheck_follows_yokebot_http_port():
    line = next(s for s in instructions() if s.startswith("HEALTHCHECK"))
    command = line.split(" CMD ", 1)[1]
    argv = shlex.split(command.split("||")[0])
    assert argv[0] == "python"
    server = HTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        run = [sys.executable, *argv[1:]]
        ok = subprocess.run(run, env={**os.environ, "YOKEBOT_HTTP_PORT": str(port)}, capture_output=True)
        assert ok.returncode == 0, ok.stderr
        other = subprocess.run(run, env={**os.environ, "YOKEBOT_HTTP_PORT": "9"}, capture_output=True)
        assert other.returncode != 0
    finally:
        server.shutdown()


def test_dockerignore_keeps_secrets_and_local_state_out():
    ignored = (ROOT / ".dockerignore").read_text().split()
    for pattern in (".git", ".venv", ".env", "*.db"):
        assert pattern in ignored


def test_env_example_names_only_real_settings():
    assert unknown_variables({}, ROOT / ".env.example") == []
    text = (ROOT / ".env.example").read_text()
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "YOKEBOT_MODEL", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"):
        assert f"\n{name}=" in text


def test_env_example_as_copied_leaves_the_platforms_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from bot.config import Settings

    for name in list(os.environ):
        if name.startswith(("OPENAI_", "YOKEBOT_", "SLACK_", "DISCORD_")):
            monkeypatch.delenv(name)
    settings = Settings(_env_file=ROOT / ".env.example")  # type: ignore[call-arg]
    assert settings.slack_bot_token is None and settings.discord_bot_token is None
    assert settings.openai_api_key is None


def test_compose_starts_postgres_and_yokebot_with_the_logs_read_only():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "yokebot"}
    bot = services["yokebot"]
    assert bot["environment"]["YOKEBOT_DATABASE_URL"].startswith("postgresql+asyncpg://")
    assert "@postgres:5432/" in bot["environment"]["YOKEBOT_DATABASE_URL"]
    assert any(v.endswith(":/var/log/nginx:ro") for v in bot["volumes"])
    assert bot["ports"] and "YOKEBOT_HTTP_PORT" in bot["ports"][0]
    assert bot["depends_on"]["postgres"]["condition"] == "service_healthy"


def _docker_daemon() -> str | None:
    """Why the image cannot be built here, or None when it can."""
    if shutil.which("docker") is None:
        return "the docker command is not installed"
    probe = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return "no Docker daemon answers `docker info` on this machine"
    return None


@pytest.mark.slow
def test_the_image_builds_and_its_cli_runs():
    reason = _docker_daemon()
    if reason is not None:
        pytest.skip(f"image build not tested: {reason}")
    tag = "yokebot-test:latest"
    build = subprocess.run(["docker", "build", "-t", tag, str(ROOT)], capture_output=True, text=True, timeout=1800)
    assert build.returncode == 0, build.stderr[-3000:]
    version = subprocess.run(["docker", "run", "--rm", tag, "yokebot", "--version"], capture_output=True, text=True,
                             timeout=120)
    assert version.returncode == 0 and version.stdout.startswith("yokebot "), version.stderr
    bwrap = subprocess.run(["docker", "run", "--rm", tag, "bwrap", "--version"], capture_output=True, text=True,
                           timeout=120)
    assert bwrap.returncode == 0, bwrap.stderr


@pytest.mark.parametrize("name", ["docker-compose.yml", "docker-compose.scale.yml"])
def test_compose_runs_the_sandbox_reads_host_logs_and_keeps_the_password_out_of_the_url(name: str):
    bot = yaml.safe_load((ROOT / name).read_text())["services"]["yokebot"]
    assert bot["env_file"] == ".env"  # every setting from one file, not re-listed here
    env = bot["environment"]
    assert not any(k.startswith(("OPENAI_", "SLACK_", "DISCORD_")) for k in env)
    url = env["YOKEBOT_DATABASE_URL"]
    assert "${" not in url and ":" not in url.split("://", 1)[1].split("@")[0]  # user only, no password
    assert env["PGPASSWORD"].startswith("${POSTGRES_PASSWORD")  # what asyncpg reads when the URL has none
    # bubblewrap needs namespaces and its own /proc: the minimal options, no capabilities, not privileged
    assert set(bot["security_opt"]) == {"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"}
    assert "cap_add" not in bot and not bot.get("privileged")
    assert "adm" in bot["group_add"]  # host logs are root:adm 0640
    assert bot["build"]["args"]["EXTRA_PACKAGES"].startswith("${EXTRA_PACKAGES")


def test_the_image_user_may_read_adm_logs_and_mcp_packages_can_be_added():
    steps = instructions()
    assert any("useradd" in s and "--groups adm" in s for s in steps)
    assert 'ARG EXTRA_PACKAGES=""' in steps
    assert any("apt-get install" in s and "bubblewrap ${EXTRA_PACKAGES}" in s for s in steps)
    assert "nodejs npm git" in DOCKERFILE  # documented where the argument is


def test_asyncpg_takes_the_password_from_pgpassword_when_the_url_has_none(monkeypatch: pytest.MonkeyPatch):
    from asyncpg import connect_utils

    monkeypatch.setenv("PGPASSWORD", "s3cr@t/with:signs")
    _addrs, params = connect_utils._parse_connect_dsn_and_args(
        dsn="postgresql://yokebot@postgres:5432/yokebot", host=None, port=None, user=None, password=None,
        passfile=None, database=None, ssl=None, direct_tls=None, server_settings=None,
        target_session_attrs=None, krbsrvname=None, gsslib=None, service=None, servicefile=None)
    assert params.password == "s3cr@t/with:signs"
