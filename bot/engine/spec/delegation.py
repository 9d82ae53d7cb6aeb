"""`delegate:` in AGENT.md: the agents this one may hand a sub-task to (docs/delegation.md), and
`max_delegation_depth:`, how deep the root agent lets its tree of sub-agents go. Data only: the tool and the
child turn are the run room's (bot/engine/run/delegate.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from bot.engine.spec.toolsettings import ToolSettings

DELEGATE = "delegate"  # the tool's name; it is in a profile's tools exactly when the profile has `delegate:`
DEFAULT_DEPTH, MAX_DEPTH = 1, 3
DELEGATE_TIMEOUT = 600.0  # seconds one sub-agent may take (its own budget and the tree's stop it sooner)


class SubAgent(BaseModel):
    """An agent this one may hand work to: its name and the description the model reads in the schema."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""


class DelegateSettings(ToolSettings):
    """The `delegate` tool's settings, made by the profile loader from `delegate:` (not written by hand)."""

    agents: tuple[SubAgent, ...] = ()

    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.agents)
