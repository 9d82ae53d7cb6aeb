"""`yokebot memory list|search QUERY|forget ID`: the agents' long-term facts (docs/knowledge.md)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.markup import escape

from bot.commands.support import err, out, with_engine

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from bot.config import Settings
    from bot.engine.ports import MemoryItem
    from bot.store.memory import SqlMemory

T = TypeVar("T")

memory_app = typer.Typer(help="Long-term memory: list, search (ranked as a prompt recalls them) and forget "
                              "the facts agents remembered.", no_args_is_help=True)

AgentOpt = Annotated[str | None, typer.Option("--agent", "-a", help="Only this agent's facts.")]
ChannelOpt = Annotated[str | None, typer.Option(
    "--channel", "-c", help="Only this channel's facts (its id as stored; search adds the facts for all channels).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table (for scripts).")]
LimitOpt = Annotated[int, typer.Option("--limit", "-n", min=1, max=10_000, help="How many facts to show.")]


def _with_memory(fn: Callable[[SqlMemory, Settings], Awaitable[T]]) -> T:
    """Run `fn` on the database's memories (with the embeddings model, when YOKEBOT_EMBEDDING_MODEL is set)."""

    async def run(engine: AsyncEngine, settings: Settings) -> T:
        from bot.app import embedder
        from bot.engine.model import OpenAIChatModel
        from bot.store.repositories import SqlStore

        model = OpenAIChatModel(api_key=settings.api_key(), base_url=settings.openai_base_url,
                                timeout=settings.model_timeout_seconds) if settings.embedding_model else None
        store = SqlStore(engine, embedder=embedder(settings, model) if model is not None else None)
        try:
            await store.memory.open_index()
            found = await fn(store.memory, settings)
            await store.memory.settled()  # the vectors a search found missing are made and stored before exit
            return found
        finally:
            await store.close()
            if model is not None:
                await model.close()

    return with_engine(run)


def _shown(settings: Settings) -> Callable[[str], str]:
    """Untrusted text for the terminal or a script: secrets redacted, control characters as U+FFFD."""
    from bot.redact import SecretRedactor, printable

    redact = SecretRedactor(settings.secret_values())
    return lambda text: printable(redact(text))


def _print(items: list[MemoryItem], settings: Settings, as_json: bool, empty: str) -> None:
    from rich.table import Table

    from bot.redact import printable_json

    shown = _shown(settings)
    if as_json:
        print(printable_json(json.dumps([_dict(i, shown) for i in items], ensure_ascii=False)))
        return
    if not items:
        out.print(empty, highlight=False)
        return
    table = Table("id", "agent", "channel", "remembered (UTC)", "fact")
    for i in items:
        table.add_row(str(i.id), escape(shown(i.agent)), escape(shown(i.channel or "(all)")),
                      i.created_at.strftime("%Y-%m-%d %H:%M"), escape(shown(i.content)))
    out.print(table)


def _dict(item: MemoryItem, shown: Callable[[str], str]) -> dict[str, Any]:
    return {"id": item.id, "agent": item.agent, "channel": item.channel, "content": shown(item.content),
            "created_at": item.created_at.isoformat()}


@memory_app.command("list")
def memory_list(agent: AgentOpt = None, channel: ChannelOpt = None, limit: LimitOpt = 50,
                as_json: JsonOpt = False) -> None:
    """The newest facts, of every agent and channel unless --agent or --channel."""

    async def newest(memory: SqlMemory, settings: Settings) -> tuple[list[MemoryItem], Settings]:
        return await memory.newest(agent, channel, limit), settings

    items, settings = _with_memory(newest)
    _print(items, settings, as_json, "No remembered facts match (agents store them with the `remember` tool).")


@memory_app.command("search")
def memory_search(
    query: Annotated[str, typer.Argument(help="Words to look for, as a message would hold them.")],
    agent: AgentOpt = None, channel: ChannelOpt = None, limit: LimitOpt = 8, as_json: JsonOpt = False,
) -> None:
    """The facts most relevant to QUERY, best first, ranked as a prompt recalls them (keywords, and embeddings
    when YOKEBOT_EMBEDDING_MODEL is set). One agent's (--agent, else YOKEBOT_DEFAULT_AGENT); with --channel,
    what a message in that channel would recall; without it, every channel's."""

    async def search(memory: SqlMemory, settings: Settings) -> tuple[list[MemoryItem], Settings]:
        name = agent or settings.default_agent
        return await memory.search(name, "any" if channel is None else "channel", channel, query, limit), settings

    items, settings = _with_memory(search)
    _print(items, settings, as_json, "No remembered facts for this agent.")


@memory_app.command("forget")
def memory_forget(
    memory_id: Annotated[int, typer.Argument(metavar="ID", help="The fact's id (`yokebot memory list`).")],
    agent: AgentOpt = None, channel: ChannelOpt = None, as_json: JsonOpt = False,
) -> None:
    """Delete one fact (with --agent or --channel: only if it is that agent's or that channel's)."""

    async def forget(memory: SqlMemory, settings: Settings) -> tuple[MemoryItem | None, Settings]:
        found = await memory.get(memory_id)
        if found is None or (agent is not None and found.agent != agent):
            return None, settings
        return await memory.forget(found.agent, memory_id, channel), settings

    gone, settings = _with_memory(forget)
    if gone is None:
        where = "".join(f" {name} {escape(value)}" for name, value in (("of agent", agent), ("in channel", channel))
                        if value is not None)
        err.print(f"[red]error:[/red] there is no remembered fact {memory_id}{where}; `yokebot memory list` "
                  "shows them.")
        raise typer.Exit(1)
    if as_json:
        from bot.redact import printable_json

        print(printable_json(json.dumps({"forgot": _dict(gone, _shown(settings))}, ensure_ascii=False)))
    else:
        out.print(f"Forgot {escape(f'[{gone.id}]')} {escape(_shown(settings)(gone.content))}", highlight=False)
