"""What stops a runaway turn: a loop guard and per-turn budgets.

Loop guard: the same tool with the same arguments `repeats` times in a turn, or an A-B-A-B ping-pong,
earns the model a note in the tool result; if it goes on, the turn ends (stopped_by = "loop").
Budgets (`budget:` in AGENT.md): tool calls, tokens, wall-clock seconds and cost in USD per turn; the first
one reached ends the turn (stopped_by = "budget:<which>"; what a turn used is counted on its `TurnState`,
state.py). Either way the model gets one last call without tools to say what it found (`loop.py`)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from bot.engine.messages import Stop, StopReason, ToolCall, Usage
from bot.engine.spec.limits import BudgetSpec

# USD per one million (prompt, completion) tokens for a model, or None when it has no price.
PriceOf = Callable[[str], tuple[float, float] | None]
GuardVerdict = Literal["ok", "warn", "stop"]  # the loop guard's word on one tool call
BudgetKind = Literal["tool_calls", "tokens", "seconds", "cost"]
BUDGET_STOPS: dict[BudgetKind, StopReason] = {
    "tool_calls": "budget:tool_calls", "tokens": "budget:tokens", "seconds": "budget:seconds", "cost": "budget:cost"}


@dataclass(frozen=True, slots=True)
class Used:
    """What a turn, or a tree of turns (tree.py), has used of a budget: `started` on the monotonic clock;
    `tool_calls` with those let through that have not finished yet."""

    usage: Usage
    cost: float
    started: float
    tool_calls: int


def budget_stop(budget: BudgetSpec, used: Used, whose: str = "this turn") -> Stop | None:
    """The stop for the first budget used up (tokens, cost, seconds, tool calls), or None."""
    s, seconds = budget, time.monotonic() - used.started
    if s.tokens is not None and used.usage.total_tokens >= s.tokens:
        which: BudgetKind = "tokens"
        detail = f"the token budget of {whose} ({used.usage.total_tokens:,} of {s.tokens:,} tokens used)"
    elif s.cost is not None and used.cost >= s.cost:
        which, detail = "cost", f"the cost budget of {whose} (${used.cost:.4f} of ${s.cost:.4f} spent)"
    elif s.seconds is not None and seconds >= s.seconds:
        which, detail = "seconds", f"the time budget of {whose} ({seconds:.0f} of {s.seconds:g} s)"
    elif s.tool_calls is not None and used.tool_calls >= s.tool_calls:
        which, detail = "tool_calls", f"the tool-call budget of {whose} ({used.tool_calls} of {s.tool_calls} calls)"
    else:
        return None
    return Stop(BUDGET_STOPS[which], "reached " + detail)


LOOP_STOP = Stop("loop", "the loop guard stopped the same tool calls coming back again and again")


def signature(call: ToolCall) -> tuple[str, str]:
    """Name and arguments, the arguments normalised (key order and spacing do not make a call new)."""
    try:
        args = json.dumps(json.loads(call.arguments or "{}"), sort_keys=True, separators=(",", ":"))
    except (ValueError, RecursionError):  # 20,000 levels of nesting: compared as written
        args = call.arguments.strip()
    return call.name, args


@dataclass
class LoopGuard:
    repeats: int = 3
    seen: Counter[tuple[str, str]] = field(default_factory=lambda: Counter[tuple[str, str]]())
    order: list[tuple[str, str]] = field(default_factory=lambda: list[tuple[str, str]]())
    warned: bool = False

    def check(self, call: ToolCall) -> GuardVerdict:
        """Record the call; 'warn' the first time a loop shows, 'stop' if it shows again after that."""
        sig = signature(call)
        self.seen[sig] += 1
        self.order.append(sig)
        o = self.order
        ping_pong = len(o) >= 4 and o[-1] == o[-3] and o[-2] == o[-4] and o[-1] != o[-2]
        if self.seen[sig] < self.repeats and not ping_pong:
            return "ok"
        if self.warned:
            return "stop"
        self.warned = True
        return "warn"

    def note(self, call: ToolCall) -> str:
        n = self.seen[signature(call)]
        if n >= self.repeats:
            what = f"called {call.name} with the same arguments {n} times in this turn"
        else:
            what = "been alternating between the same two tool calls"
        return (f"\n\n[yokebot: you have {what}; the result will not change. Use what you have, try "
                "something different, or answer. If it goes on, this turn ends here.]")
