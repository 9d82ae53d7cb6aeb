"""The system message of a turn, in a fixed order: (1) the AGENT.md body + bootstrap files + skills, ending
with the date, time and timezone; (2) long-term memory. The thread and the tool schemas follow it in each
model call, fitted to the window (`window.py`, `calls.py`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from bot.engine.context.history import repair_tool_pairs
from bot.engine.messages import Message, Scope
from bot.engine.ports import MemoryItem, MemoryStore
from bot.engine.spec.profiles import AgentProfile


def truncate_history(history: Sequence[Message], max_turns: int) -> list[Message]:
    """Keep the current turn and the `max_turns` turns before it. A turn starts at a user message, so an
    assistant tool-call message and its tool results are never separated."""
    starts = [i for i, m in enumerate(history) if m.role == "user"]
    if not starts:
        kept: list[Message] = []
    else:
        kept = list(history[starts[max(0, len(starts) - max_turns - 1)] :])
    return repair_tool_pairs(kept)


def date_line(now: datetime, tz_name: str) -> str:
    local = now.astimezone(ZoneInfo(tz_name))
    return f"Current date and time: {local:%A %Y-%m-%d %H:%M} ({tz_name}, UTC{local:%z})."


def format_memory(items: Sequence[MemoryItem]) -> str:
    lines = ["## Long-term memory", "Facts remembered earlier (id in brackets; `forget` takes the id):"]
    for item in items:
        where = "this channel" if item.channel else "all channels"
        lines.append(f"- [{item.id}] {item.content} ({where})")
    return "\n".join(lines)


class PromptBuilder:
    def __init__(
        self,
        memory: MemoryStore | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        memory_limit: int = 50,
    ) -> None:
        self.memory = memory
        self.clock = clock
        self.memory_limit = memory_limit

    def system_prompt(self, profile: AgentProfile) -> str:
        parts = [profile.system_prompt]
        for name, text in profile.bootstrap:
            parts.append(f"## {name}\n\n{text}")
        for skill in profile.skills:
            parts.append(f"## Skill: {skill.name}\n_{skill.description}_\n\n{skill.body}")
        parts.append(date_line(self.clock(), profile.timezone))
        return "\n\n".join(parts)

    def read_memory(self, agent: str, channel: str) -> asyncio.Task[list[MemoryItem]] | None:
        """Start part (2)'s database read now, in a task of its own: the service starts it once the thread's
        locks are held, and it runs while the turn opens its session (on PostgreSQL, one round trip fewer
        before the first model call). `system_message` takes it as `memories`."""
        if self.memory is None:
            return None
        return asyncio.ensure_future(self.memory.recall(agent, channel, self.memory_limit))

    async def system_message(self, profile: AgentProfile, scope: Scope,
                             memories: Awaitable[list[MemoryItem]] | None = None) -> Message:
        """Parts (1) and (2): built once per turn (the memory read is a database query; `memories`: that read,
        started earlier by `read_memory` for this profile and channel)."""
        system = self.system_prompt(profile)
        if self.memory is not None:
            items = await (memories if memories is not None else
                           self.memory.recall(profile.name, scope.channel, self.memory_limit))
            if items:
                system = f"{system}\n\n{format_memory(items)}"
        return Message.system(system)
