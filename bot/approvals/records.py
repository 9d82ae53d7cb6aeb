"""The `approvals` table as the chat side and the store share it (neither imports the other): a new request,
a stored one, and the `ApprovalRecords` port the approval desk reads and writes them through."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from bot.engine.spec import ApprovalStatus, Approver, Move


@dataclass(frozen=True, slots=True)
class NewApproval:
    session_id: str
    turn_id: str
    agent: str
    call_id: str
    tool: str
    arguments: str
    requested_by: str | None
    approvers: Sequence[Approver]
    self_approve: bool
    platform: str
    channel: str
    thread: str | None
    expires_at: datetime
    task: str | None = None  # a sub-agent asked: the task it was handed (docs/delegation.md)


@dataclass(frozen=True, slots=True)
class Approval:
    id: int
    session_id: str
    turn_id: str
    call_id: str
    tool: str
    arguments: str
    requested_by: str | None
    approvers: tuple[Approver, ...]
    self_approve: bool
    platform: str
    channel: str
    thread: str | None
    message_ref: str | None
    status: ApprovalStatus
    decided_by: str | None
    decided_at: datetime | None
    outcome: str | None
    created_at: datetime
    expires_at: datetime
    heartbeat_at: datetime | None
    agent: str = ""  # the agent whose call it is (a sub-agent's, when `task` is set)
    task: str | None = None  # a sub-agent asked: the task it was handed

    def expired(self, now: datetime) -> bool:
        return now >= self.expires_at

    @property
    def timeout_seconds(self) -> float:
        return (self.expires_at - self.created_at).total_seconds()


class ApprovalRecords(Protocol):
    """The `approvals` rows (`ApprovalStore`, bot/approvals/store.py). A decision is a conditional UPDATE, so
    exactly one of two concurrent clicks counts, on any instance sharing the database; the same transaction
    makes the inbox row of a turn parked on it claimable again."""

    async def create(self, new: NewApproval, now: datetime | None = None) -> int: ...
    async def get(self, approval_id: int) -> Approval | None: ...
    async def for_call(self, turn_id: str, call_id: str) -> Approval | None:
        """The request a turn made for one of its calls (a resumed turn asks once per call)."""
        ...
    async def adopt(self, new: NewApproval, now: datetime | None = None) -> Approval | None:
        """The request an earlier turn of this session posted for the same call (`new`'s) and was cut before
        parking on (a kill -9 in between), now `new`'s turn's; None: there is none."""
        ...
    async def decide(self, approval_id: int, status: Literal["approved", "denied"], by: str,
                     now: datetime | None = None) -> Move:
        """Truthy when this decision is the one that counts (the row was pending and had not expired)."""
        ...
    async def expire(self, approval_id: int, now: datetime | None = None) -> Move: ...
    async def claim_run(self, approval_id: int) -> bool:
        """True once per approved request: the call may run now (never a second time, after any restart)."""
        ...
    async def parked_pending(self) -> list[Approval]:
        """Pending requests whose turn is parked (their expiry is due to someone)."""
        ...
    async def pending(self, now: datetime) -> list[Approval]:
        """Every request still waiting for a decision and not expired at `now` (`/yokebot approvals`)."""
        ...
    async def set_message(self, approval_id: int, ref: str) -> None: ...
    async def heartbeat(self, approval_id: int, at: datetime | None) -> None: ...
    async def set_outcome(self, approval_id: int, outcome: str) -> None: ...
