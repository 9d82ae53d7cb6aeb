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
DRAIN_SECONDS = 30  # YOKEBOT_SLACK_DRAIN_SECONDS and the other platforms' default


def _seconds(duration: str) -> float:
    match = re.fullmatch(r"(\d+)(s|m)", duration)
    assert match, duration
    return int(match[1]) * (60 if match[2] == "m" else 1)


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
    # loopback unless told otherwise: /metrics and /readyz are not published on every interface
    assert bot["ports"][0].startswith("${HTTP_PUBLISH_ADDRESS:-127.0.0.1}:")
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
    # bubblewrap needs namespaces and its own /proc: the shipped seccomp profile (default deny, not unconfined),
    # no capabilities, not privileged
    assert set(bot["security_opt"]) == {"seccomp=./deploy/seccomp/yokebot-bwrap.json", "apparmor=unconfined",
                                        "systempaths=unconfined"}
    assert (ROOT / "deploy" / "seccomp" / "yokebot-bwrap.json").is_file()
    # SIGTERM: the turns in flight get the 30 s drain; Docker's default stop timeout (10 s) would kill them
    assert _seconds(bot["stop_grace_period"]) > DRAIN_SECONDS
    assert "cap_add" not in bot and not bot.get("privileged")
    assert "adm" in bot["group_add"]  # host logs are root:adm 0640
    assert bot["build"]["args"]["EXTRA_PACKAGES"].startswith("${EXTRA_PACKAGES")


def test_the_image_user_may_read_adm_logs_and_mcp_packages_can_be_added():
    steps = instructions()
    assert any("useradd" in s and "--groups adm" in s for s in steps)
    assert 'ARG EXTRA_PACKAGES=""' in steps
    assert any("apt-get install" in s and "${EXTRA_PACKAGES}" in s and "bubblewrap" in s for s in steps)
    assert "nodejs npm git" in DOCKERFILE  # documented where the argument is


def test_asyncpg_takes_the_password_from_pgpassword_when_the_url_has_none(monkeypatch: pytest.MonkeyPatch):
    from asyncpg import connect_utils

    monkeypatch.setenv("PGPASSWORD", "s3cr@t/with:signs")
    _addrs, params = connect_utils._parse_connect_dsn_and_args(
        dsn="postgresql://yokebot@postgres:5432/yokebot", host=None, port=None, user=None, password=None,
        passfile=None, database=None, ssl=None, direct_tls=None, server_settings=None,
        target_session_attrs=None, krbsrvname=None, gsslib=None, service=None, servicefile=None)
    assert params.password == "s3cr@t/with:signs"


def test_the_drain_default_is_what_the_stop_timeouts_are_above():
    from bot.config import Settings

    fields = Settings.model_fields
    drains = [fields[f].default for f in fields if f.endswith("_drain_seconds")]
    assert drains and max(drains) == DRAIN_SECONDS


def test_the_scale_out_proxy_publishes_on_loopback_unless_told_otherwise():
    proxy = yaml.safe_load((ROOT / "docker-compose.scale.yml").read_text())["services"]["proxy"]
    assert proxy["ports"] == ["${HTTP_PUBLISH_ADDRESS:-127.0.0.1}:8080:8080"]


class _Ready(BaseHTTPRequestHandler):
    token = "t0ken-for-the-healthcheck"

    def do_GET(self) -> None:
        ok = self.path == "/readyz" and self.headers.get("Authorization") in (None, f"Bearer {self.token}")
        self.send_response(200 if ok and (self.headers.get("Authorization") or not type(self).needs_token) else 401)
        self.end_headers()

    needs_token = False

    def log_message(self, *args: object) -> None:
        return None


def test_the_scale_out_healthcheck_sends_the_metrics_token_when_one_is_set():
    test = yaml.safe_load((ROOT / "docker-compose.scale.yml").read_text())["services"]["yokebot"]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"]
    server = HTTPServer(("127.0.0.1", 0), _Ready)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        code = test[3].replace("127.0.0.1:8080", f"127.0.0.1:{server.server_address[1]}")
        env = {k: v for k, v in os.environ.items() if k != "YOKEBOT_METRICS_TOKEN"}
        assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True).returncode == 0
        _Ready.needs_token = True
        assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True).returncode != 0
        with_token = env | {"YOKEBOT_METRICS_TOKEN": _Ready.token}
        ran = subprocess.run([sys.executable, "-c", code], env=with_token, capture_output=True)
        assert ran.returncode == 0, ran.stderr
    finally:
        _Ready.needs_token = False
        server.shutdown()


# Programs of the Debian packages every python:3.11-slim image has (Essential: yes), and of those the Dockerfile
# installs: what the shipped agents' shell allow-lists may name.
ESSENTIAL = {"tail": "coreutils", "ls": "coreutils", "df": "coreutils", "cat": "coreutils", "head": "coreutils",
             "wc": "coreutils", "grep": "grep", "zgrep": "gzip", "zcat": "gzip", "find": "findutils"}
PACKAGED = {"free": "procps", "uptime": "procps", "ps": "procps", "journalctl": "systemd", "systemctl": "systemd"}


def test_the_image_has_every_program_the_shipped_agents_allow():
    from bot.app import load_profiles
    from bot.config import Settings
    from bot.doctor_programs import missing_programs
    from bot.tools import builtin_tools
    from bot.tools.shell import ShellSettings

    install = next(s for s in instructions() if s.startswith("RUN") and "apt-get install" in s)
    installed = set(install.split("apt-get install", 1)[1].split("&&")[0].split())
    profiles = load_profiles(Settings(_env_file=None, agents_dir=ROOT / "agents"), builtin_tools())  # type: ignore[call-arg]
    programs = {(name, r.words[0]) for name, p in profiles.items() for t in p.tools.values()
                if isinstance(t, ShellSettings) for r in t.commands}
    assert {p for _, p in programs} >= {"tail", "free", "journalctl", "systemctl"}  # the ops agent's
    for agent, program in sorted(programs):
        package = ESSENTIAL.get(program) or PACKAGED.get(program)
        assert package is not None, f"agent {agent} allows {program}: which package has it? (add it here)"
        assert program in ESSENTIAL or package in installed, f"agent {agent} allows {program}: install {package}"
    assert missing_programs(profiles) == []  # and doctor, here, finds them all


def test_the_lock_is_what_the_tests_run():
    """requirements.lock (what the image installs) pins exactly the versions installed here of yokebot's
    runtime dependencies with the tokenizer, otel and vectors extras: a dependency added or upgraded without re-pinning
    (`make lock`), or a pin nobody needs any more, fails here."""
    import importlib.metadata as md

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[norm(name)] = version
    wanted: dict[str, set[str]] = {}
    todo: list[tuple[str, set[str]]] = [("yokebot", {"tokenizer", "otel", "vectors"})]
    while todo:
        name, extras = todo.pop()
        for text in md.distribution(name).requires or []:
            req = Requirement(text)
            if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in (extras or {""})):
                continue
            key = norm(req.name)
            if key not in wanted or not set(req.extras) <= wanted[key]:
                wanted[key] = wanted.get(key, set()) | set(req.extras)
                todo.append((req.name, set(req.extras)))
    installed = {name: md.version(name) for name in wanted}
    assert {n: v for n, v in pins.items() if installed.get(n) != v} == {}, (
        f"requirements.lock lags what the tests run: {[(n, pins.get(n), installed.get(n)) for n in sorted(set(pins) | set(installed)) if pins.get(n) != installed.get(n)]}")
    assert set(pins) == set(wanted), f"not pinned: {sorted(set(wanted) - set(pins))}; pinned, unused: {sorted(set(pins) - set(wanted))}"
