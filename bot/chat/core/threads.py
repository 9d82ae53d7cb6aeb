"""The port alerts (bot/alerts) post through: a root message in a channel, one-line notes in its thread, edits
of the root. Each platform offers its own (`Platform.alert_threads()`: bot/chat/slack/alerts.py,
bot/chat/discord/alerts.py). Text is Markdown whose untrusted values are already inline code (bot/alerts/render.py);
every platform still passes it through its broadcast defusing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Root:
    platform: str
    channel: str  # the channel's ID
    ref: str  # the root message (Slack ts, Discord message ID)
    thread: str  # the session's thread key: Slack the root's ts, Discord the thread opened on the root


class AlertThreads(Protocol):
    platform: str

    async def open(self, channel: str, text: str, title: str) -> Root:
        """Post the root message to `channel` (a name or an ID) and make its thread."""
        ...

    async def note(self, root: Root, text: str) -> None: ...
    async def edit(self, root: Root, text: str) -> None: ...

    def target(self, root: Root) -> tuple[str, dict[str, Any]]:
        """How the platform's `rebuild` makes a reply surface answering in the thread: (trigger, reply target)."""
        ...
