"""deploy/systemd/yokebot.service: `systemd-analyze verify` finds nothing to say (an unknown key or a bad value is
a warning there, and fails here), the stop timeout is above the drain, the settings come from an environment
file, the hardening leaves bubblewrap what it needs and `systemd-analyze security` rates it. Skipped where
systemd-analyze is missing."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_container import DRAIN_SECONDS  # checked against the settings there

UNIT = Path(__file__).resolve().parents[2] / "deploy" / "systemd" / "yokebot.service"


def settings() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            found.setdefault(key, []).append(value)
    return found


def analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        pytest.skip("systemd-analyze is not installed here")
    return found


def installed_copy(tmp_path: Path) -> Path:
    """The unit with ExecStart pointing at this checkout's yokebot (verify checks the program exists)."""
    yokebot = Path(sys.executable).with_name("yokebot")
    copy = tmp_path / UNIT.name
    copy.write_text(UNIT.read_text().replace("/opt/yokebot/bin/yokebot", str(yokebot)))
    return copy


def test_systemd_analyze_verify_finds_nothing(tmp_path: Path):
    ran = subprocess.run([analyze(), "verify", str(installed_copy(tmp_path))], capture_output=True, text=True,
                         timeout=60)
    assert ran.returncode == 0 and ran.stderr.strip() == "" and ran.stdout.strip() == "", ran.stderr + ran.stdout


def test_systemd_analyze_verify_would_say_so(tmp_path: Path):
    """The check above can fail: a misspelt key is reported."""
    bad = installed_copy(tmp_path)
    bad.write_text(bad.read_text().replace("ProtectSystem=strict", "ProtectSystm=strict"))
    ran = subprocess.run([analyze(), "verify", str(bad)], capture_output=True, text=True, timeout=60)
    assert "Unknown key" in ran.stderr


def test_the_hardening_is_rated(tmp_path: Path):
    ran = subprocess.run([analyze(), "security", "--offline=true", str(installed_copy(tmp_path))], capture_output=True,
                         text=True, timeout=60)
    level = re.search(r"Overall exposure level for \S+: ([\d.]+)", ran.stdout + ran.stderr)
    if level is None:
        pytest.skip(f"this systemd-analyze cannot rate a unit offline: {ran.stderr.strip()[:200]}")
    assert float(level[1]) <= 4.0, ran.stdout[-3000:]  # 3.2 ("OK") when written; 9.6 is a unit without any


def test_stop_timeout_drain_environment_file_and_what_bubblewrap_needs():
    unit = settings()
    assert int(unit["TimeoutStopSec"][0]) > DRAIN_SECONDS
    assert unit["KillMode"] == ["mixed"] and unit["KillSignal"] == ["SIGTERM"]
    assert unit["EnvironmentFile"] == ["/etc/yokebot/yokebot.env"]
    assert unit["NoNewPrivileges"] == ["yes"] and unit["CapabilityBoundingSet"] == [""]
    namespaces = set(unit["RestrictNamespaces"][0].split())
    assert namespaces == {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"}  # bwrap --unshare-all
    assert {"mount", "umount2", "pivot_root"} <= set(unit["SystemCallFilter"][0].split())
    assert "AF_NETLINK" in unit["RestrictAddressFamilies"][0]  # the sandbox's loopback interface
    for breaks_proc in ("ProtectKernelTunables", "ProtectKernelLogs", "ProtectProc", "PrivateUsers"):
        assert breaks_proc not in unit, f"{breaks_proc} stops bwrap from mounting its /proc (or hides the logs)"
