"""One error base, two families: control flow that the engine handles, and failures."""

from __future__ import annotations

from typing import Any


class YokebotError(Exception):
    """Base of every error yokebot raises on purpose. `str(err)` is one sentence a user understands."""


# --- control flow: raised by tools and caught by the executor -------------------------------------------
class ToolControl(YokebotError):
    """Raised inside a tool to steer the executor rather than to report a bug."""


class ToolRetry(ToolControl):
    """A transient failure: the executor retries the call with backoff."""


class ToolDenied(ToolControl):
    """The sandbox refused the call. `allowed` tells the model what it may do instead."""

    def __init__(self, reason: str, allowed: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.allowed = allowed


class ToolFailed(ToolControl):
    """An expected failure (file missing, platform not configured): the model reads the message."""


class ApprovalPending(YokebotError):
    """Raised by the approval gate for a turn that can park (`RunContext.parks`): the request is posted (or
    was, before the turn parked) and no decision is in yet. The loop parks the turn (bot/engine/run/parked.py)."""

    def __init__(self, approval_id: int, call_id: str, *, more: tuple[int, ...] = (),
                 child: dict[str, Any] | None = None) -> None:
        super().__init__(f"approval {approval_id} for call {call_id} is pending")
        self.approval_id = approval_id
        self.call_id = call_id
        self.approvals = (approval_id, *more)  # a sub-agent's turn may wait for several (bot/engine/run/delegate.py)
        self.child = child  # the parked sub-agent's turn, stored with its parent's state


# --- failures ----------------------------------------------------------------------------------------------
class ConfigError(YokebotError):
    """The settings are incomplete or wrong."""


class ProfileError(YokebotError):
    """An agent profile could not be loaded."""

    def __init__(self, path: str, problem: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.line = line
        self.problem = problem


class ModelError(YokebotError):
    """The model could not be called (after retries, or on a request it will never accept).

    Raised by the wire client with retry advice (`retryable`, the HTTP `status`, the server's `retry_after`
    in seconds) that the retrying wrapper follows; `detail` is the underlying error for the audit row."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        code: str | None = None,
        status: int | None = None,
        retry_after: float | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.code = code
        self.status = status
        self.retry_after = retry_after
        self.detail = detail


class ContextOverflow(ModelError):
    """The server refused the prompt as longer than its context window; what it stated, when it did."""

    def __init__(self, message: str, *, window: int | None = None, prompt_tokens: int | None = None,
                 status: int | None = None, detail: str | None = None) -> None:
        super().__init__(message, code="context_length_exceeded", status=status, detail=detail)
        self.window = window
        self.prompt_tokens = prompt_tokens


class UnknownAgent(YokebotError):
    """No profile with that name."""


class SessionNotFound(YokebotError):
    """No session with that id."""
