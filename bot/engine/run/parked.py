"""A turn parked on an approval (docs/approvals.md): its state, stored while nobody waits in-process.

    gated call ─> the gate posts the request, raises ApprovalPending ─> the loop raises TurnParked(ParkedTurn)
    ─> the service hands the state to the turn's `Parking` (the inbox row: `parked`, no lease) and returns;
    the task ends, its concurrency slot and the thread's lock are free
    decision (a click on any instance, or the expiry) ─> the row is claimable again ─> one instance takes it
    ─> the service runs `ReActLoop.resume` on the state: the decided call runs (or not), the loop goes on

The state is the stored form of the turn's `TurnState` (state.py: `parked()`, `restore()`), what the loop
needs to go on: this turn's messages so far (the last one is the model's message
with the tool calls), what the calls of the pending group that did finish returned, the counts the budgets and
the step limit read, and the pending approvals. JSON, so the store keeps it as it is."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.engine.messages import Message, ToolCall, Usage


@dataclass(frozen=True, slots=True)
class ParkedTurn:
    messages: tuple[Message, ...]  # this turn's messages (the user's, the model's, the tool results so far)
    done: dict[str, str] = field(default_factory=lambda: dict[str, str]())  # call id -> what the model reads
    iterations: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    approvals: tuple[int, ...] = ()  # the requests it waits for
    # a `delegate` call waiting with its sub-agent's parked turn: call id -> that turn (bot/engine/run/delegate.py)
    children: dict[str, dict[str, Any]] = field(default_factory=lambda: dict[str, dict[str, Any]]())
    tree: dict[str, Any] | None = None  # what the whole tree of sub-agents used (the root's state only; tree.py)

    def pending_calls(self) -> list[ToolCall]:
        """The calls of the model's last message that have no result yet, in the model's order."""
        last = next((m for m in reversed(self.messages) if m.role == "assistant" and m.tool_calls), None)
        if last is None:
            return []
        answered = {m.tool_call_id for m in self.messages if m.role == "tool"}
        return [c for c in last.tool_calls if c.id not in answered]

    def to_dict(self) -> dict[str, Any]:
        return {"messages": [m.to_dict() for m in self.messages], "done": dict(self.done),
                "iterations": self.iterations, "tool_calls": self.tool_calls,
                "usage": [self.usage.prompt_tokens, self.usage.completion_tokens], "approvals": list(self.approvals),
                **({"children": dict(self.children)} if self.children else {}),
                **({"tree": self.tree} if self.tree is not None else {})}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ParkedTurn:
        usage = data.get("usage") or [0, 0]
        return cls(tuple(Message.from_dict(m) for m in data.get("messages", ())), dict(data.get("done") or {}),
                   int(data.get("iterations", 0)), int(data.get("tool_calls", 0)), Usage(int(usage[0]), int(usage[1])),
                   tuple(int(a) for a in data.get("approvals", ())), dict(data.get("children") or {}),
                   data.get("tree"))


class TurnParked(Exception):  # control flow, like StopIteration: the turn did not fail
    """The loop stopped to wait for a decision; `state` is what it needs to go on."""

    def __init__(self, state: ParkedTurn) -> None:
        super().__init__("the turn waits for an approval")
        self.state = state


class Parking(Protocol):
    """Where a turn's state is kept while it waits (the chat side's inbox row, bot/chat/core/inbox_turns.py)."""

    async def park(self, state: ParkedTurn) -> bool:
        """Store the state and let go of the turn; False when a decision came in already (go on at once)."""
        ...

    async def waiting(self, session_id: str) -> str | None:
        """The tool another turn of this thread is parked on (this message must not run ahead of it), or None."""
        ...

