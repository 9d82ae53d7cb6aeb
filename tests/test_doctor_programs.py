"""`doctor` names each program an agent's shell allow-list allows that is not installed: the agent, the tool and
the program, with what to do (a container image without procps has no `free`)."""

from __future__ import annotations

from pathlib import Path

from bot.app import load_profiles
from bot.doctor import run_checks
from bot.doctor_programs import check_programs, missing_programs
from bot.tools import builtin_tools
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI

PROFILE = """---
tools:
  shell:
    roots: [{logs}]
    isolation: preferred
    commands:
      - command: tail
        flags: {{"-n": int}}
        args: ["path..."]
      - command: yokebot-no-such-program -x
        host: true
      - command: free -m
        host: true
      - command: mytool
        executable: {logs}/not-there
        host: true
---
You are {name}.
"""


def agents(tmp_path: Path) -> Path:
    root = tmp_path / "agents"
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("ops", "host"):
        (root / name).mkdir(parents=True)
        (root / name / "AGENT.md").write_text(PROFILE.format(logs=logs, name=name))
    (root / "plain").mkdir()
    (root / "plain" / "AGENT.md").write_text("---\ntools:\n  current_time: {}\n---\nYou are plain.\n")
    return root


async def test_each_missing_program_is_named_with_its_agent_and_tool(tmp_path: Path, fake_llm: FakeOpenAI):
    settings = make_settings(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}", fake_llm, agents(tmp_path),
                             default_agent="ops")
    profiles = load_profiles(settings, builtin_tools())
    assert missing_programs(profiles) == [
        ("host", "shell", "yokebot-no-such-program"), ("host", "shell", f"{tmp_path}/logs/not-there"),
        ("ops", "shell", "yokebot-no-such-program"), ("ops", "shell", f"{tmp_path}/logs/not-there")]
    checks = check_programs(profiles)
    assert [c.name for c in checks] == ["agent host", "agent host", "agent ops", "agent ops"]
    assert all(c.warning for c in checks)
    assert checks[2].detail == "its tool shell allows yokebot-no-such-program, which is not installed here"
    assert str(profiles["ops"].path) in (checks[2].fix or "") and "Dockerfile" in (checks[2].fix or "")
    # the whole doctor run carries them (tail and free exist here: not named)
    details = [c.detail for c in await run_checks(settings)]
    assert sum("which is not installed here" in d for d in details) == 4
    assert not any("allows tail" in d or "allows free" in d for d in details)


def test_the_shipped_agents_name_only_programs_installed_here():
    """This machine (like the image) has every program of the shipped agents' allow-lists."""
    from bot.config import Settings

    root = Path(__file__).resolve().parents[1]
    settings = Settings(_env_file=None, agents_dir=root / "agents")  # type: ignore[call-arg]
    profiles = load_profiles(settings, builtin_tools())
    assert "ops" in profiles
    assert missing_programs(profiles) == []
    assert [c.name for c in check_programs(profiles)] == ["programs"]
