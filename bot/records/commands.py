"""What the chat commands (`/yokebot status|approvals|alerts|usage`, bot/chat/core/commands.py) read, as plain
data, and the port they read it through (`CommandFacts`): the chat core and the store meet here without
importing each other. docs/commands.md."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class WaitingApproval:
    """An approval request still waiting for a decision."""

    id: int
    tool: str
    agent: str
    platform: str
    channel: str
    thread: str | None
    message_ref: str | None  # where the request was posted (the platform's reference), when known
    requested_by: str | None
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class FiringAlert:
    """An alert group firing now, and where its thread is."""

    title: str
    agent: str
    alerts: int  # how many of its alerts fire
    platform: str | None
    channel: str | None
    root_ref: str | None  # the root message (Slack ts, Discord message ID, Mattermost post ID)
    fired_at: datetime
    thread: str | None = None  # the thread's key (on Discord a channel of its own)


@dataclass(frozen=True, slots=True)
class UsageLine:
    """What one agent's model calls in one channel used since a time."""

    agent: str
    calls: int
    tokens: int
    cost: float | None  # None: a model without a price (YOKEBOT_MODEL_PRICES)


class CommandFacts(Protocol):
    async def waiting_approvals(self, platform: str, user: str, groups: frozenset[str]) -> list[WaitingApproval]:
        """Pending requests on `platform` that `user` (in `groups`) may decide."""
        ...

    async def pending_approvals(self) -> int:
        """How many requests wait for a decision, anywhere."""
        ...

    async def firing_alerts(self, where: tuple[str, str] | None = None) -> list[FiringAlert]:
        """The groups firing now, the latest first (a few); `where` (platform, channel): only those whose thread
        is in that channel."""
        ...

    async def firing_count(self, where: tuple[str, str] | None = None) -> int:
        """How many groups fire now (`where`: as above)."""
        ...

    async def channel_usage(self, platform: str, channel: str, since: datetime) -> list[UsageLine]: ...
