"""The engine's Notifier port, routed to the chat adapter a target names (`slack:#ops`, `discord:123`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from bot.chat.core.base import ChatAdapter
from bot.engine.errors import ToolFailed
from bot.engine.messages import Scope


class Fallback(Protocol):
    """Where an alert goes when no adapter of this process posts to its platform (`yokebot chat`: the
    terminal). Nobody is notified there, and `notify` tells the model so."""

    def why_not(self, platform: str) -> str:
        """Why a post to `platform` reaches nobody, in a few words."""
        ...

    async def show(self, target: str, text: str) -> str: ...


class AdapterNotifier:
    def __init__(self, hints: Mapping[str, str] | None = None, fallback: Fallback | None = None) -> None:
        """`hints`: per platform, how to configure it (the registry's, bot/chat/platforms.py). `fallback`:
        where alerts go that no adapter here posts (`yokebot chat`: the terminal); None: `notify` fails."""
        self.adapters: dict[str, ChatAdapter] = {}
        self.hints = dict(hints or {})
        self.fallback = fallback

    def register(self, adapter: ChatAdapter) -> None:
        self.adapters[adapter.platform] = adapter

    def unreachable(self, target: str) -> str | None:
        platform = target.partition(":")[0]
        if platform in self.adapters or self.fallback is None:
            return None
        return self.fallback.why_not(platform)

    async def notify(self, target: str, text: str, scope: Scope | None = None) -> str:
        """Post through the target's platform. One rule for every command (`run`, `chat`, `ask`, `schedule run`):
        a turn in a thread of that platform hands its conversation on, and a target that is the thread's channel
        gets the post in the thread (an alert's investigation notifying the channel of its root adds no second
        top-level post there)."""
        platform, sep, channel = target.partition(":")
        if not sep or not channel:
            raise ToolFailed(f"{target!r} is not a channel target; write it as platform:channel, like slack:#ops")
        adapter = self.adapters.get(platform)
        if adapter is None and self.fallback is not None:
            return await self.fallback.show(target, text)
        if adapter is None:
            hint = self.hints.get(platform, "no adapter exists for this platform")
            raise ToolFailed(f"cannot post to {target}: {platform} is not configured in this process ({hint})")
        if scope is not None and scope.platform == platform and scope.thread:
            return await adapter.post(channel, text, scope)
        return await adapter.post(channel, text)
