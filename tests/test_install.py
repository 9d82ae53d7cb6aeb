"""A non-checkout install (`pipx install .`, `pip install .` into a fresh venv, run from another folder) finds the
shipped agents: the wheel carries them as package data of `bot.shipped` (bot/shipped/agents links to agents/) and
the demo's files in `bot.demo`, and a process started where there is no ./agents uses them and says so.

Fast: the wheel's file list is computed from pyproject.toml's package-data the way setuptools globs it (building a
wheel needs setuptools >= 77 from the registry; the build and an install into a fresh venv were checked by hand,
docs in the README's "Without a checkout")."""

from __future__ import annotations

import glob
import os
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app as cli
from tests.test_cli import ROOT


def wheel_data(package: str) -> set[str]:
    """The files the wheel takes as `package`'s data: its package-data patterns globbed under its folder, as
    setuptools' build_py does (relative to the package, following links)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert any(package.startswith(p.rstrip("*")) for p in config["packages"]["find"]["include"])
    where = ROOT / package.replace(".", "/")
    assert (where / "__init__.py").is_file()  # a package setuptools finds
    found: set[str] = set()
    for pattern in config["package-data"].get(package, []):
        found |= {str(Path(p).relative_to(where)) for p in glob.glob(str(where / pattern), recursive=True)
                  if os.path.isfile(p)}
    return found


def test_the_wheel_carries_the_shipped_agents_and_the_demo():
    shipped = wheel_data("bot.shipped")
    every = {str(p.relative_to(ROOT)) for p in (ROOT / "agents").rglob("*") if p.is_file()}
    assert {"agents/ops/AGENT.md", "agents/logs/AGENT.md", "agents/metrics/AGENT.md"} <= shipped
    assert shipped == every  # every file of every shipped agent: runbooks, skills, bootstrap files
    assert (ROOT / "bot" / "shipped" / "agents").resolve() == (ROOT / "agents").resolve()
    assert {"AGENT.md", "nginx-access.log", "nginx-error.log"} <= wheel_data("bot.demo")


def test_started_outside_a_checkout_yokebot_uses_the_installed_agents_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from bot.commands.support import where_from
    from bot.config import load_settings
    from bot.shipped import shipped_agents

    monkeypatch.chdir(tmp_path)  # no ./agents here
    monkeypatch.delenv("YOKEBOT_AGENTS_DIR", raising=False)
    settings = load_settings()
    assert shipped_agents() is not None and settings.agents_dir == shipped_agents()
    (note, *_) = where_from(settings, "ops")
    assert note == (f"agent ops from {(shipped_agents() / 'ops' / 'AGENT.md').resolve()} (the agents installed "
                    "with yokebot: no ./agents here and YOKEBOT_AGENTS_DIR unset)")
    listed = CliRunner().invoke(cli, ["agents", "list"], env={"COLUMNS": "250", "YOKEBOT_AGENTS_DIR": None})
    assert listed.exit_code == 0, listed.output
    assert all(f"│ {name} " in listed.output for name in ("ops", "logs", "metrics"))

    (tmp_path / "agents" / "mine").mkdir(parents=True)  # a folder of one's own wins, as before
    (tmp_path / "agents" / "mine" / "AGENT.md").write_text("---\ndescription: mine\n---\nMine.\n")
    assert load_settings().agents_dir == Path("./agents")
