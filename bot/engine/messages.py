"""Typed conversation parts. Converted to the wire format only in `engine/model/wire.py`; stored in one form,
`Message.to_dict`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
# not_posted: the tool ran and did what it could, but what it is for did not happen (notify with no platform to
# post to: the alert was only shown in a terminal); neither ok nor an error, and the model is told so
ToolStatus = Literal["ok", "error", "denied", "not_posted"]
DETAIL_MARK = "[full result, for the audit only; the model did not read what follows]"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as the model asked for it; `arguments` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        return cls(id=str(data["id"]), name=str(data["name"]), arguments=str(data.get("arguments", "")))


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image sent with a user message (bot/engine/context/attachments.py): base64 data, never stored in
    `messages`."""

    mimetype: str
    data: str  # base64
    sha256: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    images: tuple[ImagePart, ...] = ()  # user messages only: sent as image parts, not kept in history

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", content=text)

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", content=text)

    @classmethod
    def assistant(cls, text: str, tool_calls: tuple[ToolCall, ...] = ()) -> Message:
        return cls(role="assistant", content=text, tool_calls=tool_calls)

    @classmethod
    def tool(cls, call_id: str, name: str, text: str) -> Message:
        return cls(role="tool", content=text, tool_call_id=call_id, name=name)

    def to_dict(self) -> dict[str, Any]:
        """The one stored form of a message: the `messages` row's columns, a parked turn's state. Images are
        not kept (the `attachments` rows say what they were): a thread read again has the text. The model's
        wire format is another thing, made at the edge (`model/wire.py`)."""
        return {"role": self.role, "content": self.content,
                "tool_calls": [c.to_dict() for c in self.tool_calls] or None,
                "tool_call_id": self.tool_call_id, "name": self.name}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """A message from its stored form (`to_dict`, or a `messages` row's mapping)."""
        stored: Iterable[dict[str, Any]] = data.get("tool_calls") or ()
        return cls(role=data["role"], content=str(data.get("content") or ""),
                   tool_calls=tuple(ToolCall.from_dict(c) for c in stored), tool_call_id=data.get("tool_call_id"),
                   name=data.get("name"))


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens)


@dataclass(frozen=True, slots=True)
class ModelResponse:
    message: Message
    usage: Usage
    finish_reason: str | None
    model: str


@dataclass(frozen=True, slots=True)
class GuardEvent:
    """A guardrail's decision (docs/guardrails.md): which rule (`rule`: its name, or its stage and type) matched
    at which stage, what it did, and the text around the match with the match replaced by its mark."""

    stage: str  # input, tool_args, tool_result, output
    rule: str
    type: str  # pii, secrets, injection, regex
    action: str  # block, redact, warn
    excerpt: str
    kind: str = ""  # the PII kind (email, phone, ...) of a pii rule's first match


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call came to. `content` is what the model reads back; `started_at` / `finished_at` (UTC)
    say when it ran (calls of one model message may run at the same time)."""

    call_id: str
    tool: str
    arguments: Any
    content: str
    status: ToolStatus
    attempts: int = 1
    duration_ms: float = 0.0
    reason: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    detail: str | None = None  # more than the model reads, for the audit row only (ToolOutput.detail)
    guarded: tuple[GuardEvent, ...] = ()  # what the tool_result guardrails decided (the loop reports them)

    @property
    def audit_text(self) -> str:
        """The `tool_invocations.result` text: what the model read, then the detail when there is one."""
        if not self.detail:
            return self.content
        return f"{self.content}\n\n{DETAIL_MARK}\n{self.detail}"

    def trace(self) -> dict[str, Any]:
        out = {"tool": self.tool, "arguments": self.arguments, "result": self.content, "status": self.status}
        return {**out, "reason": self.reason} if self.reason else out  # e.g. who approved or denied it


# What ended a turn: as stored in `turns.stopped_by` and shown by `ask --json` and `trace`.
StopReason = Literal["answer", "iteration_limit", "budget:tool_calls", "budget:tokens", "budget:seconds",
                     "budget:cost", "budget:daily_cost", "budget:monthly_cost", "budget:daily_tokens", "loop", "error",
                     "interrupted", "user", "guardrail"]
TurnStatus = Literal["ok", "limit", "error", "stopped"]
# The cancellation message of a turn its user stopped (Ctrl-C in `yokebot chat`): `task.cancel(USER_STOP)`. The
# service records such a turn as `stopped` by `user`, not as an error; any other cancellation is a shutdown.
USER_STOP = "stopped by the user"


@dataclass(frozen=True, slots=True)
class Stop:
    """Why a turn is ending before the model answered, and the words the model is told it in."""

    reason: StopReason
    detail: str  # e.g. "reached the step limit of this agent (4 model calls)"


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """How a turn ended."""

    answer: str
    iterations: int = 0
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    stopped_by: StopReason = "answer"
    tool_calls: tuple[ToolResult, ...] = ()

    @property
    def status(self) -> TurnStatus:
        """The `turns.status` column: stopped (by its user), error, limit (stopped before a final answer), or ok."""
        if self.stopped_by == "user":
            return "stopped"
        if self.error:
            return "error"
        return "ok" if self.stopped_by == "answer" else "limit"


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The outcome of one turn, and where it happened."""

    session_id: str
    turn_id: str
    outcome: TurnOutcome
    parked: bool = False  # the turn waits for an approval; its answer comes when it is resumed (parked.py)

    @property
    def answer(self) -> str:
        return self.outcome.answer

    @property
    def iterations(self) -> int:
        return self.outcome.iterations

    @property
    def usage(self) -> Usage:
        return self.outcome.usage

    @property
    def error(self) -> str | None:
        return self.outcome.error

    @property
    def stopped_by(self) -> StopReason:
        return self.outcome.stopped_by

    @property
    def tool_calls(self) -> tuple[ToolResult, ...]:
        return self.outcome.tool_calls

    @property
    def hit_iteration_limit(self) -> bool:
        return self.outcome.stopped_by == "iteration_limit"

    def to_json(self) -> str:
        return json.dumps(
            {
                "answer": self.answer,
                "session_id": self.session_id,
                "iterations": self.iterations,
                "hit_iteration_limit": self.hit_iteration_limit,
                "stopped_by": self.stopped_by,
                "tool_calls": [r.trace() for r in self.tool_calls],
            },
            ensure_ascii=False,
        )


@dataclass(frozen=True, slots=True)
class HistoryTurn:
    turn_id: str
    messages: tuple[Message, ...]


@dataclass
class Thread:
    """A session's memory as the store hands it over: the latest summary and the turns after it."""

    summary: str | None = None
    turns: list[HistoryTurn] = field(default_factory=lambda: list[HistoryTurn]())

    @classmethod
    def from_messages(cls, messages: Sequence[Message]) -> Thread:
        """Turns without ids (tests, callers with a plain list): compacted in memory, never stored."""
        turns: list[HistoryTurn] = []
        current: list[Message] = []
        for m in messages:
            if m.role == "user" and current:
                turns.append(HistoryTurn("", tuple(current)))
                current = []
            current.append(m)
        if current:
            turns.append(HistoryTurn("", tuple(current)))
        return cls(None, turns)


# What started a turn: a platform's mention, DM or thread follow-up, a command typed to it (`/yokebot …`,
# docs/commands.md), the terminal (`chat`), `ask`, a schedule, an alert, an eval scenario, or a caller of the
# Python API that does not say ("message").
Trigger = Literal["mention", "dm", "thread", "command", "console", "cli", "schedule", "alert", "eval", "message"]


def conversation_key(platform: str, channel: str, thread: str) -> str:
    """One conversation (a thread of a channel of a platform): what the turn locks hold, in this process and
    across processes (its session is opened under them); the inbox orders turns by its digest."""
    return f"{platform}\x1f{channel}\x1f{thread}"


@dataclass(frozen=True, slots=True)
class Scope:
    """Where a turn happens."""

    platform: str
    channel: str
    thread: str
    user: str | None = None
