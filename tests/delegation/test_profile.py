"""`delegate:` and `max_delegation_depth:` in AGENT.md: what loads, and one clear sentence for what does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.engine.errors import ProfileError
from bot.engine.spec import ProfileLoader
from tests.helpers import registry, write_agent


def load(agents: Path, name: str = "lead"):
    return ProfileLoader(agents, registry()).load(name)


def test_delegate_adds_the_tool_with_the_named_agents_descriptions(tmp_path: Path):
    write_agent(tmp_path, "lead", "delegate: [logs]\nmax_delegation_depth: 2")
    write_agent(tmp_path, "logs", "description: |\n  reads\n  the logs\ntools: [echo]")
    lead = load(tmp_path)
    assert lead.delegate == ("logs",) and lead.max_delegation_depth == 2
    assert [(a.name, a.description) for a in lead.tools["delegate"].agents] == [("logs", "reads the logs")]  # type: ignore[attr-defined]
    assert "delegate" not in load(tmp_path, "logs").tools


@pytest.mark.parametrize(("front", "problem"), [
    ("delegate: [billing]", "AGENT.md:2: delegate: there is no agent 'billing' (known agents: logs)"),
    ("delegate: [lead]", "delegate: 'lead' is this agent itself"),
    ("delegate: [logs, logs]", "delegate: 'logs' is named twice"),
    ("delegate: [Logs!]", "delegate: 'Logs!' is not a valid agent name"),
    ("delegate: [logs]\nmax_delegation_depth: 4", "max_delegation_depth: Input should be less than or equal to 3"),
    ("tools: [delegate]", "unknown tool 'delegate'"),
])
def test_a_bad_delegate_list_stops_the_profile_with_one_sentence(tmp_path: Path, front: str, problem: str):
    write_agent(tmp_path, "lead", front)
    write_agent(tmp_path, "logs", "description: reads the logs")
    with pytest.raises(ProfileError) as err:
        load(tmp_path)
    assert problem in str(err.value)
