"""One budget over a tree of turns: a turn and the sub-agents it hands work to (docs/delegation.md).

The root turn's budgets (`budget:` of the root agent: tool calls, tokens, seconds, cost) bound the whole tree.
Every turn of the tree charges its model calls and tool calls here as they happen (`TurnState.charge`,
`count_call`), next to its own counts; a `delegate` call is one of its parent's tool calls from the moment it
starts (`running`), so a sub-agent started with the last call of the budget has none left. Each turn's
`TurnState.exceeded` asks the tree too: a sub-agent stops when the root's budget is spent, and so does the
root. What a parked tree used is stored with the root's state (`counts`, `restore`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from bot.engine.messages import Stop, Usage
from bot.engine.run.guards import Used, budget_stop
from bot.engine.spec.limits import BudgetSpec


@dataclass(slots=True)
class TurnTree:
    """What the turns of one tree have used together, against the root agent's budget."""

    budget: BudgetSpec
    max_depth: int = 1  # the root agent's `max_delegation_depth`
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    tool_calls: int = 0  # finished tool calls of every turn in the tree
    running: int = 0  # delegate calls under way (each is already one of its parent's calls)
    started: float = field(default_factory=time.monotonic)

    def charge(self, usage: Usage, cost: float) -> None:
        self.usage += usage
        self.cost += cost

    def exceeded(self, pending: int = 0) -> Stop | None:
        """The stop for the first of the root's budgets the tree has used up, or None."""
        used = Used(self.usage, self.cost, self.started, self.tool_calls + self.running + pending)
        return budget_stop(self.budget, used, "the turn and its sub-agents")

    # --- a parked tree -----------------------------------------------------------------------------------
    def counts(self) -> dict[str, Any]:
        return {"usage": [self.usage.prompt_tokens, self.usage.completion_tokens], "cost": self.cost,
                "tool_calls": self.tool_calls}

    def restore(self, data: dict[str, Any]) -> None:
        usage = data.get("usage") or [0, 0]
        self.usage = Usage(int(usage[0]), int(usage[1]))
        self.cost, self.tool_calls = float(data.get("cost", 0.0)), int(data.get("tool_calls", 0))
