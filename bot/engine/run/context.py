"""The run context: one typed object per turn (pydantic-ai's RunContext[Deps]), handed to the loop, the
executor, every hook and, wrapped with the tool's own typed settings, to every tool call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from bot.engine.context.attachments import TurnFiles
from bot.engine.messages import Scope, Trigger
from bot.engine.ports import MemoryItem, MemoryStore, Notifier, NotifyLedger
from bot.engine.run.approval import ApprovalDecision, ApprovalRequest
from bot.engine.run.spend import TurnSpend
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

    @property
    def agent(self) -> str:
        return self.profile.name

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
