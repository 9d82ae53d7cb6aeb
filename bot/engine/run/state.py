"""One turn's state, in one object: `TurnState`.

What a run changes as it goes is here and nowhere else: its messages so far, the tool results, how many model
calls it made (`iterations`) and tool calls it ran, what it used of its budgets (tokens, cost, the clock), the
loop guard's memory, and how it ended. The loop changes it, the call path charges every model call to it
(`calls.py`), a turn that parks is this state stored (`parked()`; `restore()` on the way back; parked.py is the
stored form), and plan mode keeps one for the whole plan.

What a turn *is* (its session, profile, scope, the services it may use) stays apart in the immutable
`RunContext`: tools read that, never this (STYLE.md 4, 19)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from bot.engine.messages import Message, Stop, StopReason, ToolResult, TurnOutcome, Usage
from bot.engine.run.calls import ModelCalls
from bot.engine.run.context import RunContext
from bot.engine.run.guards import LoopGuard, PriceOf, Used, budget_stop
from bot.engine.run.hooks import TurnHooks
from bot.engine.run.parked import ParkedTurn
from bot.engine.spec.limits import BudgetSpec


@dataclass(slots=True)
class TurnState:
    """One run of the loop (or one plan): what it runs with (`run`, `hooks`, `calls`, `schemas`: fixed when it
    starts) and what it has done and used so far (the rest)."""

    run: RunContext
    hooks: TurnHooks
    calls: ModelCalls
    schemas: tuple[dict[str, Any], ...] = ()
    price: PriceOf | None = None
    guard: LoopGuard = field(default_factory=LoopGuard)
    messages: list[Message] = field(default_factory=lambda: list[Message]())
    results: list[ToolResult] = field(default_factory=lambda: list[ToolResult]())
    iterations: int = 0  # model calls of the turn's own (the step limit counts them)
    tool_calls: int = 0  # tool calls that ran (the tool-call budget counts them)
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    started: float = field(default_factory=time.monotonic)
    stopped_by: StopReason = "answer"
    error: str | None = None
    withheld: dict[str, ToolResult] = field(default_factory=lambda: dict[str, ToolResult]())  # tool_args blocks

    @property
    def budget(self) -> BudgetSpec:
        return self.run.profile.budget

    # --- the budgets ----------------------------------------------------------------------------------------
    def charge(self, model: str, usage: Usage) -> None:
        """A model call of this turn answered (the call path, `calls.py`); a tree of sub-agents is charged too."""
        self.usage += usage
        per_million = self.price(model) if self.price is not None else None
        cost = 0.0
        if per_million is not None:
            cost = (usage.prompt_tokens * per_million[0] + usage.completion_tokens * per_million[1]) / 1e6
            self.cost += cost
        if self.run.delegation is not None:
            self.run.delegation.tree.charge(usage, cost)

    def count_call(self) -> None:
        """A tool call of this turn ran (the tool-call budget counts it; a tree of sub-agents too)."""
        self.tool_calls += 1
        if self.run.delegation is not None:
            self.run.delegation.tree.tool_calls += 1

    def exceeded(self, pending: int = 0) -> Stop | None:
        """The stop for the first budget used up (tokens, cost, seconds, tool calls), or None. `pending`:
        tool calls let through that have not finished yet (they run at the same time). In a tree of
        sub-agents, the root's budget over the whole tree too (tree.py)."""
        stop = budget_stop(self.budget, Used(self.usage, self.cost, self.started, self.tool_calls + pending))
        if stop is not None:
            return stop
        return self.run.delegation.tree.exceeded(pending) if self.run.delegation is not None else None

    # --- how it ends ----------------------------------------------------------------------------------------
    def outcome(self, answer: str, stopped_by: StopReason | None = None, error: str | None = None) -> TurnOutcome:
        if stopped_by is not None:
            self.stopped_by = stopped_by
        if error is not None:
            self.error = error
        return TurnOutcome(answer, self.iterations, self.usage, self.error, self.stopped_by, tuple(self.results))

    def parked(self, done: dict[str, str], tool_calls: int, approvals: tuple[int, ...],
               children: dict[str, dict[str, Any]] | None = None) -> ParkedTurn:
        """The state to store while the turn waits for `approvals`: `done`, the calls of the pending group that
        finished (their results); `tool_calls`, the count the budget reads, those calls included; `children`,
        the parked turns of its sub-agents that wait (by the parent's call id). The root of a tree of
        sub-agents keeps what the tree used."""
        d = self.run.delegation
        tree = None
        if d is not None and d.parent_turn is None:  # the calls of the group that finished count as they did here
            tree = {**d.tree.counts(), "tool_calls": d.tree.tool_calls + tool_calls - self.tool_calls}
        return ParkedTurn(tuple(self.messages), done, self.iterations, tool_calls, self.usage, approvals,
                          children or {}, tree)

    def restore(self, parked: ParkedTurn) -> None:
        """Go on from a stored state (a resumed turn): its messages and the counts its limits read."""
        self.messages, self.iterations = list(parked.messages), parked.iterations
        self.usage, self.tool_calls = parked.usage, parked.tool_calls
