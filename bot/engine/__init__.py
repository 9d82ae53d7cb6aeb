"""The agent engine: a ReAct loop over typed messages, with no platform, database or web library.

Its public surface, which is all that code outside the engine imports (import-linter checks it):
- `bot.engine.service`: `AgentService` runs a turn (`TurnRequest`), the one entry for every platform;
- the shared vocabulary: `bot.engine.messages` (messages, tool calls and results, a turn's outcome, its
  `Trigger` and `Scope`), `bot.engine.errors`, `bot.engine.replies` (the sentences users read),
  `bot.engine.ports` (the Protocols the store and the chat side implement);
- four rooms, each imported through its face (its `__init__`), never a module inside it:
  `bot.engine.spec` (the AGENT.md spec), `bot.engine.model` (the model client over the wire),
  `bot.engine.context` (what the model reads) and `bot.engine.run` (running a turn);
- `bot.engine.testing`: a scripted model and recording hooks for tests.

The rooms are layers (service > run > context > model > spec > vocabulary): a room imports only the rooms
below it. `AgentService` and `TurnRequest` are also importable from here; they load on first use, so that
importing a vocabulary module does not load the whole engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.engine.service import AgentService, TurnRequest

__all__ = ["AgentService", "TurnRequest"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from bot.engine import service

        return getattr(service, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
