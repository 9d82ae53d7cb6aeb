"""The system message of a turn, in a fixed order: (1) the AGENT.md body + bootstrap files + skills, ending
with the date, time and timezone; (2) long-term memory: the remembered facts most relevant to the turn's
message (an alert's investigation: its text holds the alert's labels), at most `memory: {recall: K}` of them
within `memory.max_tokens`, each passed through the same gate as a tool result (control characters out,
secrets redacted). The thread and the tool schemas follow it in each model call, fitted to the window
(`window.py`, `calls.py`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from bot.engine.context.history import repair_tool_pairs
from bot.engine.guard import UNTRUSTED_NOTE, untrusted
from bot.engine.messages import Message, Scope
from bot.engine.ports import MemoryItem, MemoryStore
from bot.engine.spec.profiles import AgentProfile
from bot.redact import for_model

CHARS_PER_TOKEN = 4  # the memory section's budget is estimated, not counted: it is built before the model is known


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


def format_memory(items: Sequence[MemoryItem], max_tokens: int,
                  redact: Callable[[str], str] = lambda text: text) -> tuple[str, list[int]]:
    """The memory section, best first, within `max_tokens` (a fact that does not fit is left out, and the
    next ones are tried); each fact is untrusted text (a model wrote it): control characters out, secrets
    redacted. Returns the section ("" when no fact is shown) and the ids shown."""
    lines = ["## Long-term memory", "Facts remembered earlier, the most relevant to this message first (id in "
             "brackets; `forget` takes the id):"]
    room = max_tokens * CHARS_PER_TOKEN - sum(len(line) + 1 for line in lines)
    shown: list[int] = []
    for item in items:
        where = "this channel" if item.channel else "all channels"
        line = f"- [{item.id}] {' '.join(redact(for_model(item.content)).split())} ({where})"
        if len(line) + 1 > room:
            continue
        room -= len(line) + 1
        lines.append(line)
        shown.append(item.id)
    if not shown:
        return "", shown
    return "\n".join([*lines[:2], untrusted("\n".join(lines[2:]), "memory")]), shown


class PromptBuilder:
    def __init__(
        self,
        memory: MemoryStore | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        redact: Callable[[str], str] = lambda text: text,
    ) -> None:
        self.memory = memory
        self.clock = clock
        self.redact = redact  # the executor's: what reaches the model from a memory is what a tool result may hold

    def system_prompt(self, profile: AgentProfile) -> str:
        parts = [profile.system_prompt]
        for name, text in profile.bootstrap:
            parts.append(f"## {name}\n\n{text}")
        for skill in profile.skills:
            parts.append(f"## Skill: {skill.name}\n_{skill.description}_\n\n{skill.body}")
        parts.append(UNTRUSTED_NOTE)  # what the markers around tool results, files and alerts mean
        parts.append(date_line(self.clock(), profile.timezone))
        return "\n\n".join(parts)

    def read_memory(self, profile: AgentProfile, channel: str, query: str) -> asyncio.Task[list[MemoryItem]] | None:
        """Start part (2)'s database read now, in a task of its own: the service starts it once the thread's
        locks are held, and it runs while the turn opens its session (on PostgreSQL, one round trip fewer
        before the first model call). `query`: the turn's message. `system_message` takes it as `memories`."""
        if self.memory is None or profile.memory.recall == 0:
            return None
        return asyncio.ensure_future(self.memory.recall(profile.name, channel, query, profile.memory.recall))

    async def system_message(self, profile: AgentProfile, scope: Scope,
                             memories: Awaitable[list[MemoryItem]] | None = None) -> Message:
        """Parts (1) and (2): built once per turn (`memories`: the read `read_memory` started for this profile,
        channel and message; without it, the newest facts)."""
        system = self.system_prompt(profile)
        if self.memory is not None and profile.memory.recall > 0:
            items = await (memories if memories is not None else
                           self.memory.recall(profile.name, scope.channel, "", profile.memory.recall))
            section, shown = format_memory(items, profile.memory.max_tokens, self.redact)
            if shown:
                self.memory.recalled(shown)
                system = f"{system}\n\n{section}"
        return Message.system(system)
