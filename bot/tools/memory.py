"""remember / forget: long-term facts in `memories`, scoped to the agent and the channel of the conversation.
The PromptBuilder shows them in later prompts (with their ids, which `forget` takes)."""

from __future__ import annotations

from pydantic import Field

from bot.engine.errors import ToolFailed
from bot.engine.ports import MemoryStore
from bot.engine.run import ToolContext, require, tool
from bot.engine.spec import ToolSettings


class MemorySettings(ToolSettings):
    max_chars: int = Field(default=500, ge=10, le=10_000)
    # facts per channel: a full channel drops its least recalled, oldest fact for a new one (docs/knowledge.md)
    max_items: int = Field(default=10_000, ge=1, le=100_000)


DROPPED_SHOWN = 200  # characters of a dropped fact quoted in the result


def _store(ctx: ToolContext[MemorySettings]) -> MemoryStore:
    if ctx.memory is None:
        raise ToolFailed("long-term memory is not available in this process")
    return ctx.memory


@tool(
    "remember",
    "Store a durable fact for later conversations in this channel (a team convention, a known flaky host, "
    "who owns what). Use it only when someone asks you to remember something or the fact will clearly matter "
    "again; not for one-off results. One short sentence.",
    settings=MemorySettings,
    side_effects=True,
)
async def remember(ctx: ToolContext[MemorySettings], fact: str) -> str:
    settings = ctx.settings
    memory = _store(ctx)
    text = " ".join(fact.split())
    require(bool(text), "the fact is empty")
    require(
        len(text) <= settings.max_chars,
        f"the fact is {len(text)} characters long; keep it under {settings.max_chars}",
    )
    # the store checks for the same fact and makes room atomically with the INSERT: parallel calls (several
    # `remember`s in one model reply, or on two instances) neither store a fact twice nor overfill the channel
    done = await memory.remember(ctx.agent, ctx.scope.channel, text, ctx.session_id, settings.max_items)
    if not done.new:
        return f"Already remembered as [{done.id}]."
    if done.dropped is not None:
        old = done.dropped.content
        quoted = old if len(old) <= DROPPED_SHOWN else f"{old[:DROPPED_SHOWN]}…"
        return (f"Remembered as [{done.id}]. Memory for this channel was full ({settings.max_items} facts), so "
                f"the least recalled, oldest fact was dropped: [{done.dropped.id}] {quoted}")
    return f"Remembered as [{done.id}]."


@tool(
    "forget",
    "Delete a remembered fact by its id (shown in brackets in the long-term memory section). Use it when a "
    "fact is wrong or outdated, or someone asks you to forget it.",
    settings=MemorySettings,
    side_effects=True,
)
async def forget(ctx: ToolContext[MemorySettings], id: int) -> str:
    gone = await _store(ctx).forget(ctx.agent, id, ctx.scope.channel)
    require(gone is not None, f"there is no remembered fact [{id}] in this channel")
    return f"Forgot [{id}]."
