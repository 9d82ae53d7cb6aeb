"""A gated call at run time: the request the executor asks the `ApprovalGate` about, the decision it gets back,
and the observation the model reads (docs/approvals.md). The policy behind it is the spec room's
(bot/engine/spec/approval.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.engine.spec.approval import ApprovalSpec, ApprovalVerdict


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One gated call: the exact call (arguments already redacted) and who may decide."""

    call_id: str
    tool: str
    arguments: str
    spec: ApprovalSpec
    via: tuple[str, str] | None = None  # a sub-agent asked: (its name, the task it was handed)


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """What came of a request. `by` is who decided (None: expired or refused); `note` is one sentence for the
    model when the call did not run (refused: why nobody could be asked)."""

    verdict: ApprovalVerdict
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
