"""Human approval for risky tool calls: the profile's `approval:` setting, and the gate the executor asks.

The engine only knows the port (`ApprovalGate`, in bot/engine/run/context.py next to the RunContext it reads):
`decide` posts the request where the turn happens, waits for a
decision (or the timeout) and says what came of it. `bot/approvals/desk.py` implements it for every
platform; the executor turns the decision into the tool's observation (docs/approvals.md)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_serializer, field_validator

from bot.engine.spec.targets import IdRule, id_rule

REQUESTER = "requester"
DEFAULT_TIMEOUT = "10m"
_DURATION = re.compile(r"^\s*(\d+)\s*(s|m|h)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600}
# Slack user (U…, W…) or user group (S…) IDs; Discord user or role IDs (snowflakes). No keyword has this shape.
# The rule when the loader names none; `yokebot run` and the commands pass every platform's (`ids`).
_PLATFORM_ID = re.compile(r"^(?:[UWS][A-Z0-9_]{2,30}|\d{15,21})$")
_ID_CHARS = re.compile(r"^[A-Za-z0-9_-]{2,64}$")  # what any platform's ID is made of (no `@`, `#` or space)
MAX_TIMEOUT_SECONDS = 24 * 3600
# What a platform ID can name there (Slack: `U…`/`W…` a user, `S…` a user group; Discord: a snowflake, user or role)
ApproverKind = Literal["user", "group", "either"]


@dataclass(frozen=True, slots=True)
class Requester:
    """The keyword `requester`: whoever asked for the call, matched by the ID the request was made with. A keyword
    is never an ID: a clicker whose ID is the word `requester` is not this entry."""


@dataclass(frozen=True, slots=True)
class PlatformId:
    """A Slack user (`U…`, `W…`) or user group (`S…`) ID, or a Discord user or role ID (digits); which of these
    it names is the platform's rule (`ApprovalButtons.kind`)."""

    id: str

    def __post_init__(self) -> None:
        if self.id in _KEYWORDS:
            raise ValueError(f"{self.id!r} is a keyword, not an ID")


Approver = Requester | PlatformId  # typed once, at load; IDs and keywords never share a namespace
_KEYWORDS: dict[str, Approver] = {REQUESTER: Requester()}
_NOT_AN_APPROVER = ("{who!r} is not an approver; use a Slack user ID (U…) or user group ID (S…), a Discord user or "
                    "role ID (digits, in quotes), another platform's user ID (docs/approvals.md), or `requester` "
                    "(IDs, not names: names can be taken by others)")


def parse_approver(text: object, is_id: IdRule | None = None) -> Approver:
    """One `approvers:` entry of AGENT.md: a keyword, or an ID of a shape a platform gives (ValueError: neither).
    `is_id`: the platforms' rule (bot/chat/platforms.py); None: the shapes Slack and Discord give."""
    if isinstance(text, str):
        if text in _KEYWORDS:
            return _KEYWORDS[text]
        if (is_id(text) and _ID_CHARS.match(text)) if is_id is not None else _PLATFORM_ID.match(text):
            return PlatformId(text)
    raise ValueError(_NOT_AN_APPROVER.format(who=text))


def dump_approvers(approvers: Iterable[Approver]) -> list[str]:
    """The stored (and shown) form: the keyword's word, or the ID; unambiguous since no ID is spelled as a keyword."""
    return [REQUESTER if isinstance(a, Requester) else a.id for a in approvers]


def load_approvers(stored: Iterable[object]) -> tuple[Approver, ...]:
    """The stored form read back (the `approvals` rows, as every release wrote them)."""
    return tuple(_KEYWORDS.get(str(s)) or PlatformId(str(s)) for s in stored)


def parse_duration(text: str) -> int:
    """`90s`, `10m`, `2h` -> seconds."""
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a duration; write it like 90s, 10m or 2h")
    return int(m.group(1)) * _UNITS[m.group(2)]


class ApprovalSpec(BaseModel):
    """`approval: {approvers: [U123, S456, requester], timeout: 10m, self_approve: false}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approvers: tuple[Approver, ...] = Field(min_length=1)
    timeout: str | int = DEFAULT_TIMEOUT
    self_approve: bool = False

    @field_validator("approvers", mode="before")
    @classmethod
    def _approvers(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, list | tuple):
            entries: Sequence[object] = cast(Sequence[object], value)
            rule = id_rule(info)
            return tuple(who if isinstance(who, Requester | PlatformId) else parse_approver(who, rule)
                         for who in entries)
        return value  # not a list: pydantic says so

    @field_serializer("approvers")
    def _dump_approvers(self, value: tuple[Approver, ...]) -> list[str]:
        return dump_approvers(value)

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


def may_approve(approvers: Iterable[Approver], self_approve: bool, requester: str | None, user: str,
                groups: frozenset[str], kind: Callable[[str], ApproverKind]) -> bool:
    """Whether the user with ID `user` (in `groups`: Slack user groups, Discord roles) may decide a request made by
    the user with ID `requester`; `kind` is the platform's rule for what an ID names. The keyword matches the
    requester's ID, never a clicker's ID spelled like it; an ID entry matches the clicker only if it can name a
    user, and the clicker's groups only if it can name a group."""
    if kind(user) == "group":
        return False  # not a user at all (a Slack `S…` ID): it decides nothing
    asked = requester is not None and user == requester
    if asked and not self_approve:
        return False
    for entry in approvers:
        if isinstance(entry, Requester):
            if asked:
                return True
        elif (kind(entry.id) != "group" and entry.id == user) or (kind(entry.id) != "user" and entry.id in groups):
            return True
    return False


ApprovalVerdict = Literal["approved", "denied", "expired", "refused"]  # what came of one request
ApprovalStatus = Literal["pending", "approved", "denied", "expired"]
# What a decision (or an expiry) did: "" it did not count (decided already); "woke": the turn was parked and its
# inbox row is claimable again (resume it); "live": an inbox row holds the turn (it reads the decision itself);
# "decided": no inbox row holds it (a turn waiting in-process, or one that is gone)
Move = Literal["", "woke", "live", "decided"]












