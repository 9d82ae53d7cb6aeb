from __future__ import annotations

from pathlib import Path

import pytest

from bot.engine.errors import ProfileError, UnknownAgent
from bot.engine.spec.profiles import ProfileLoader
from bot.tools import builtin_tools
from tests.helpers import registry, write_agent

REPO_AGENTS = Path(__file__).resolve().parents[2] / "agents"


def loader(d: Path) -> ProfileLoader:
    return ProfileLoader(d, registry())


def test_shipped_agents_load_with_the_builtin_tools():
    profiles = ProfileLoader(REPO_AGENTS, builtin_tools()).load_all()
    assert {"ops", "reporter"} <= set(profiles)
    ops = profiles["ops"]
    assert ops.tools["notify"].default == "slack:#ops-alerts"  # type: ignore[attr-defined]
    assert ops.max_iterations == 10 and ops.bootstrap and ops.skills
    assert all(name in builtin_tools() for name in ops.tools if name != "delegate")
    assert ops.delegate == ("logs", "metrics") and {"logs", "metrics"} <= set(profiles)  # its sub-agents ship too


def test_full_profile_with_bootstrap_skills_and_tool_settings(tmp_path: Path):
    write_agent(tmp_path, "full", """
model: small-model
max_iterations: 3
max_history_turns: 7
timezone: Europe/Berlin
tools:
  read_file: {roots: [/var/log], max_bytes: 100}
  echo:
bootstrap: [NOTES.md]
skills: [triage]
""", body="Be useful.", files={
        "NOTES.md": "Team notes here.",
        "skills/triage/SKILL.md": "---\nname: triage\ndescription: how to triage\n---\nStep one.",
    })
    p = loader(tmp_path).load("full")
    assert (p.model, p.max_iterations, p.max_history_turns, p.timezone) == ("small-model", 3, 7, "Europe/Berlin")
    assert list(p.tools) == ["read_file", "echo"]
    assert p.tools["read_file"].roots == ("/var/log",)  # type: ignore[attr-defined]
    assert p.bootstrap == (("NOTES.md", "Team notes here."),)
    assert p.skills[0].name == "triage" and p.skills[0].body == "Step one."
    assert p.system_prompt == "Be useful."


def test_defaults(tmp_path: Path):
    write_agent(tmp_path, "plain", "description: x")
    p = loader(tmp_path).load("plain")
    assert (p.max_iterations, p.max_history_turns, p.timezone, dict(p.tools)) == (10, 20, "UTC", {})


@pytest.mark.parametrize(
    ("front", "line", "message"),
    [
        ("description: x\ntools: [echo, rm_rf]", 3, "unknown tool 'rm_rf'"),
        ("description: x\ncolour: blue", 3, "colour: unknown key"),
        ("description: x\nbootstrap: [MISSING.md]", 3, "MISSING.md does not exist"),
        ("description: x\nskills: [nope]", 3, "skill 'nope'"),
        ("description: x\nmax_iterations: zero", 3, "max_iterations"),
        ("description: x\ntools:\n  read_file: {rootz: [/]}", 4, "tools.read_file.rootz: unknown setting"),
        ("description: x\ntimezone: Mars/Olympus", 3, "unknown timezone"),
        ("description: x\n  bad: [indent", 3, "invalid YAML"),
        # notify owns the top-level `notify:` section: checked as its settings, also when the tool is unused
        ("description: x\ntools: [notify]\nnotify:\n  defualt: slack:#ops", 5, "notify.defualt: unknown setting"),
        ("description: x\nnotify:\n  dedup_window_seconds: soon", 4, "notify.dedup_window_seconds:"),
        ("description: x\nnotify: slack:#ops", 3, "notify: must be a mapping"),
    ],
)
def test_bad_profiles_fail_with_file_line_and_problem(tmp_path: Path, front: str, line: int, message: str):
    path = write_agent(tmp_path, "bad", front)
    with pytest.raises(ProfileError) as info:
        loader(tmp_path).load("bad")
    text = str(info.value)
    assert text.startswith(f"{path}:{line}: "), text
    assert message in text


def test_missing_front_matter_and_empty_body(tmp_path: Path):
    (tmp_path / "nofm").mkdir()
    (tmp_path / "nofm" / "AGENT.md").write_text("just text")
    with pytest.raises(ProfileError, match="must start with a '---' line"):
        loader(tmp_path).load("nofm")
    write_agent(tmp_path, "empty", "description: x", body="")
    with pytest.raises(ProfileError, match=r"body .* is empty"):
        loader(tmp_path).load("empty")


def test_unknown_agent_lists_the_known_ones(tmp_path: Path):
    write_agent(tmp_path, "alpha", "description: a")
    with pytest.raises(UnknownAgent, match=r"No agent named 'beta'.*known agents: alpha"):
        loader(tmp_path).load("beta")
    with pytest.raises(UnknownAgent, match="not a valid agent name"):
        loader(tmp_path).load("../etc")


def test_the_notify_section_and_the_tools_entry_make_one_typed_settings(tmp_path: Path):
    write_agent(tmp_path, "n", """
description: x
tools:
  notify: {max_chars: 200}
notify:
  default: "slack:#ops"
  allowed: ["slack:#oncall"]
""")
    settings = loader(tmp_path).load("n").tools["notify"]
    assert type(settings).__name__ == "NotifySettings"
    assert (settings.default, settings.allowed, settings.max_chars) == (  # type: ignore[attr-defined]
        "slack:#ops", ("slack:#oncall",), 200)
