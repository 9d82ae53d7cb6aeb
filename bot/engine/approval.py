"""Human approval for risky tool calls: the profile's `approval:` setting, and the gate the executor asks.

The engine only knows the port (`ApprovalGate`, in bot/engine/context.py next to the RunContext it reads):
`decide` posts the request where the turn happens, waits for a
decision (or the timeout) and says what came of it. `bot/chat/core/approvals.py` implements it for every
platform; the executor turns the decision into the tool's observation (docs/approvals.md)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

REQUESTER = "requester"
DEFAULT_TIMEOUT = "10m"
_DURATION = re.compile(r"^\s*(\d+)\s*(s|m|h)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600}
# Slack user (U…, W…) or user group (S…) IDs; Discord user or role IDs (snowflakes); or `requester`.
_APPROVER = re.compile(r"^(?:[UWS][A-Z0-9_]{2,30}|\d{15,21}|requester)$")
MAX_TIMEOUT_SECONDS = 24 * 3600


def parse_duration(text: str) -> int:
    """`90s`, `10m`, `2h` -> seconds."""
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a duration; write it like 90s, 10m or 2h")
    return int(m.group(1)) * _UNITS[m.group(2)]


class ApprovalSpec(BaseModel):
    """`approval: {approvers: [U123, S456, requester], timeout: 10m, self_approve: false}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approvers: tuple[str, ...] = Field(min_length=1)
    timeout: str | int = DEFAULT_TIMEOUT
    self_approve: bool = False

    @field_validator("approvers")
    @classmethod
    def _approvers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for who in value:
            if not _APPROVER.match(who):
                raise ValueError(
                    f"{who!r} is not an approver; use a Slack user ID (U…) or user group ID (S…), a Discord "
                    "user or role ID (digits), or `requester` (IDs, not names: names can be taken by others)")
        return value

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, value: str | int) -> str | int:
        seconds = value if isinstance(value, int) else parse_duration(value)
        if not 1 <= seconds <= MAX_TIMEOUT_SECONDS:
            raise ValueError(f"the timeout must be between 1 s and 24 h, not {value!r}")
        return value

    @property
    def timeout_seconds(self) -> int:
        return self.timeout if isinstance(self.timeout, int) else parse_duration(self.timeout)


def may_approve(spec_approvers: tuple[str, ...], self_approve: bool, requester: str | None, user: str,
                groups: frozenset[str]) -> bool:
    """Whether `user` (in `groups`: Slack user groups, Discord roles) may decide a request made by `requester`."""
    if user == requester and not self_approve:
        return False
    if REQUESTER in spec_approvers and user == requester:
        return True
    return user in spec_approvers or bool(groups & set(spec_approvers))


Verdict = Literal["approved", "denied", "expired", "refused"]
ApprovalStatus = Literal["pending", "approved", "denied", "expired"]
# What a decision (or an expiry) did: "" it did not count (decided already); "woke": the turn was parked and its
# inbox row is claimable again (resume it); "live": an inbox row holds the turn (it reads the decision itself);
# "decided": no inbox row holds it (a turn waiting in-process, or one that is gone)
Move = Literal["", "woke", "live", "decided"]


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One gated call: the exact call (arguments already redacted) and who may decide."""

    call_id: str
    tool: str
    arguments: str
    spec: ApprovalSpec


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """What came of a request. `by` is who decided (None: expired or refused); `note` is one sentence for the
    model when the call did not run (refused: why nobody could be asked)."""

    verdict: Verdict
    by: str | None = None
    at: datetime | None = None
    note: str = ""
    approval_id: int | None = None

    @property
    def approved(self) -> bool:
        return self.verdict == "approved"


def observation(request: ApprovalRequest, decision: ApprovalDecision) -> tuple[str, str]:
    """(what the model reads, the audit reason) for a call that did not run."""
    if decision.verdict == "denied":
        return (f"Not run: {decision.by} denied the request to run {request.tool}. Do not retry it; tell the "
                "user it was denied.", f"denied by {decision.by}")
    if decision.verdict == "expired":
        return (f"Not run: nobody approved {request.tool} within {request.spec.timeout_seconds} s, so the "
                "request expired.", "approval expired")
    return f"Not run: {decision.note}", decision.note or "approval refused"


# --- the approvals table, as the chat side and the store share it (neither imports the other) ---------------
@dataclass(frozen=True, slots=True)
class NewApproval:
    session_id: str
    turn_id: str
    agent: str
    call_id: str
    tool: str
    arguments: str
    requested_by: str | None
    approvers: Sequence[str]
    self_approve: bool
    platform: str
    channel: str
    thread: str | None
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class Approval:
    id: int
    session_id: str
    turn_id: str
    call_id: str
    tool: str
    arguments: str
    requested_by: str | None
    approvers: tuple[str, ...]
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

    def expired(self, now: datetime) -> bool:
        return now >= self.expires_at

    @property
    def timeout_seconds(self) -> float:
        return (self.expires_at - self.created_at).total_seconds()


class ApprovalRecords(Protocol):
    """The `approvals` rows (`ApprovalStore`, bot/store/approvals.py). A decision is a conditional UPDATE, so
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
    async def set_message(self, approval_id: int, ref: str) -> None: ...
    async def heartbeat(self, approval_id: int, at: datetime | None) -> None: ...
    async def set_outcome(self, approval_id: int, outcome: str) -> None: ...
