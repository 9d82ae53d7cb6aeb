"""remember / forget: long-term facts in `memories`, scoped to the agent and the channel of the conversation.
The PromptBuilder shows them in later prompts (with their ids, which `forget` takes)."""

from __future__ import annotations

from pydantic import Field

from bot.engine.errors import ToolFailed
from bot.engine.ports import MemoryItem, MemoryStore
from bot.engine.run import ToolContext, require, tool
from bot.engine.spec import ToolSettings


class MemorySettings(ToolSettings):
    max_chars: int = Field(default=500, ge=10, le=10_000)
    max_items: int = Field(default=50, ge=1, le=1000)


def _store(ctx: ToolContext[MemorySettings]) -> MemoryStore:
    if ctx.memory is None:
        raise ToolFailed("long-term memory is not available in this process")
    return ctx.memory


async def channel_items(ctx: ToolContext[MemorySettings], memory: MemoryStore, limit: int) -> list[MemoryItem]:
    items = await memory.recall(ctx.agent, ctx.scope.channel, limit)
    return [i for i in items if i.channel == ctx.scope.channel]


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
    items = await channel_items(ctx, memory, settings.max_items * 4)
    same = next((i for i in items if i.content == text), None)
    if same is not None:
        return f"Already remembered as [{same.id}]."
    require(
        len(items) < settings.max_items,
        f"memory for this channel is full ({settings.max_items} facts); forget an outdated one first",
    )
    # the checks above answer the common case in words; the store repeats both atomically with the INSERT, so
    # parallel calls (several `remember`s in one model reply, or on two instances) cannot get past them
    new_id = await memory.remember(ctx.agent, ctx.scope.channel, text, ctx.session_id, settings.max_items)
    if new_id is None:
        items = await channel_items(ctx, memory, settings.max_items * 4)
        same = next((i for i in items if i.content == text), None)
        if same is not None:
            return f"Already remembered as [{same.id}]."
        require(False, f"memory for this channel is full ({settings.max_items} facts); forget an outdated one "
                       "first")
    return f"Remembered as [{new_id}]."


@tool(
    "forget",
    "Delete a remembered fact by its id (shown in brackets in the long-term memory section). Use it when a "
    "fact is wrong or outdated, or someone asks you to forget it.",
    settings=MemorySettings,
    side_effects=True,
)
async def forget(ctx: ToolContext[MemorySettings], id: int) -> str:
    settings = ctx.settings
    memory = _store(ctx)
    items = await channel_items(ctx, memory, settings.max_items * 4)
    require(any(i.id == id for i in items), f"there is no remembered fact [{id}] in this channel")
    require(await memory.forget(ctx.agent, id), f"fact [{id}] could not be deleted (already gone?)")
    return f"Forgot [{id}]."
