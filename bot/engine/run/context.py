"""The run context: one typed object per turn (pydantic-ai's RunContext[Deps]), handed to the loop, the
executor, every hook and, wrapped with the tool's own typed settings, to every tool call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from bot.engine.context.attachments import TurnFiles
from bot.engine.messages import Scope, Trigger, TurnOutcome
from bot.engine.ports import MemoryItem, MemoryStore, Notifier, NotifyLedger
from bot.engine.run.approval import ApprovalDecision, ApprovalRequest
from bot.engine.run.spend import TurnSpend
from bot.engine.run.tree import TurnTree
from bot.engine.spec.profiles import AgentProfile
from bot.engine.spec.toolsettings import ToolSettings


@dataclass(frozen=True)
class RunContext:
    """The facts of one turn and what it may use. Built once per turn; never stored on a tool."""

    session_id: str
    turn_id: str
    profile: AgentProfile
    scope: Scope
    trigger: Trigger = "message"
    notifier: Notifier | None = None
    memory: MemoryStore | None = None
    approvals: ApprovalGate | None = None  # who is asked before a gated tool runs
    files: TurnFiles | None = None  # the text files attached to this turn's message (read_attachment)
    notify_ledger: NotifyLedger | None = None  # alerts sent, across instances; None: the notify tool's own
    parks: bool = False  # a gated call's wait parks the turn (its state stored) instead of holding its task
    memories: Awaitable[list[MemoryItem]] | None = None  # the memory read for the system prompt, under way
    spend: TurnSpend | None = None  # the spend caps this turn runs under (spend.py); None: no cap applies
    delegation: Delegation | None = None  # its place in a tree of sub-agents (an agent with `delegate:`, a child)

    @property
    def agent(self) -> str:
        return self.profile.name

    @property
    def parent_turn_id(self) -> str | None:
        """The turn that handed this one its task (a sub-agent's turn), or None."""
        return self.delegation.parent_turn if self.delegation is not None else None

    @property
    def timezone(self) -> str:
        return self.profile.timezone


class ApprovalGate(Protocol):
    """Asks a human before a gated tool runs (bot/engine/spec/approval.py): posts the request where the turn
    happens and waits until it is decided or expires; a turn that `parks` is not waited for: `decide` raises
    ApprovalPending (bot/engine/errors.py) and, once the turn is resumed, returns the decision made meanwhile
    (one request per call). Implemented in bot/approvals/desk.py."""

    async def decide(self, run: RunContext, request: ApprovalRequest) -> ApprovalDecision: ...

    async def ran(self, decision: ApprovalDecision, status: str) -> None:
        """The approved call ran (`status` is the tool's): recorded on the request's row."""
        ...


class SubAgents(Protocol):
    """Runs a sub-agent's turn for a `delegate` call (bot/engine/run/delegate.py); implemented by the service,
    which owns sessions, hooks and the loop (bot/engine/service.py)."""

    def profile(self, agent: str) -> AgentProfile: ...

    def tokens(self, model: str, text: str) -> int:
        """How many tokens `text` is for `model` (the task must fit the sub-agent's window)."""
        ...

    def side_effects(self, agent: str) -> bool:
        """Could a turn of `agent` change something outside it (a tool of its, or of its sub-agents, does)?"""
        ...

    async def run_child(self, parent: RunContext, call_id: str, profile: AgentProfile, task: str) -> TurnOutcome:
        """The child turn for the parent's call `call_id`: run (or, in a resumed tree, resumed), recorded and
        finished. Raises TurnParked when it waits for an approval (the parent parks with it)."""
        ...


@dataclass(frozen=True, slots=True)
class Delegation:
    """Where a turn sits in a tree of sub-agents (docs/delegation.md): what the tree shares (its budget, who runs
    children), the agents from the root down to this turn, and the parent's turn and call (None at the root)."""

    tree: TurnTree
    runner: SubAgents
    agents: tuple[str, ...]  # the root's agent first, this turn's last
    parent_turn: str | None = None
    parent_call: str | None = None
    task: str = ""  # what the parent asked (a sub-agent's approval requests name it)
    resume: Mapping[str, Any] = field(default_factory=lambda: dict[str, Any]())  # call id -> a parked child's state

    @property
    def depth(self) -> int:
        """0 for the root, 1 for its sub-agents, ..."""
        return len(self.agents) - 1


SettingsT = TypeVar("SettingsT", bound=ToolSettings)


@dataclass(frozen=True, slots=True)
class ToolContext(Generic[SettingsT]):
    """What one tool call sees: the turn's RunContext and this tool's settings, typed for the tool
    (`ctx: ToolContext[ShellSettings]`)."""

    run: RunContext
    settings: SettingsT
    # the executor's secret redactor: a tool that cuts its output redacts first (bot.redact.cut)
    redact: Callable[[str], str] = str
    reply: int = 0  # which model reply of the turn asked for this call (1, 2, ...): per-reply limits
    call_id: str = ""  # the model's id of this call

    @property
    def session_id(self) -> str:
        return self.run.session_id

    @property
    def turn_id(self) -> str:
        return self.run.turn_id

    @property
    def agent(self) -> str:
        return self.run.agent

    @property
    def scope(self) -> Scope:
        return self.run.scope

    @property
    def timezone(self) -> str:
        return self.run.timezone

    @property
    def notifier(self) -> Notifier | None:
        return self.run.notifier

    @property
    def memory(self) -> MemoryStore | None:
        return self.run.memory
