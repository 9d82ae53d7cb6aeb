"""What a tool is: a name, a description that says WHEN to use it, a JSON schema derived from a typed
signature, and an async function that receives a per-run context (tools hold no per-run state)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from bot.engine.errors import ToolFailed
from bot.engine.ports import MemoryStore, Notifier

if TYPE_CHECKING:
    from bot.engine.profiles import NotifySpec


class ToolSettings(BaseModel):
    """Per-tool settings from the profile's `tools:` mapping. Tools subclass this; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: float | None = None
    max_attempts: int | None = None


@dataclass(frozen=True, slots=True)
class Scope:
    """Where a turn happens."""

    platform: str
    channel: str
    thread: str
    user: str | None = None


@dataclass(frozen=True)
class ToolContext:
    """Everything one tool call may know about its run. Built per call; never stored on a tool."""

    session_id: str
    turn_id: str
    agent: str
    scope: Scope
    settings: ToolSettings
    timezone: str = "UTC"
    notifier: Notifier | None = None
    memory: MemoryStore | None = None
    notify_policy: NotifySpec | None = None  # the profile's `notify:` (default target, allowed, dedup window)


ToolFn = Callable[..., Awaitable[str]]
GuardFn = Callable[[ToolContext, BaseModel], Awaitable[None]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args_model: type[BaseModel]
    fn: ToolFn
    settings_model: type[ToolSettings] = ToolSettings
    guard: GuardFn | None = None
    timeout: float = 30.0
    # True when running it changes something outside the turn (posts, writes memory): a turn interrupted
    # after such a call is not run again on recovery, the thread is told instead (docs/architecture.md).
    side_effects: bool = False

    def schema(self) -> dict[str, Any]:
        """The function-calling schema; computed once (pydantic's schema generation is not cheap)."""
        cached: dict[str, Any] | None = self.__dict__.get("_schema")
        if cached is None:
            cached = self._build_schema()
            self.__dict__["_schema"] = cached
        return cached

    def _build_schema(self) -> dict[str, Any]:
        params = self.args_model.model_json_schema()
        params.pop("title", None)
        for prop in cast(dict[str, dict[str, Any]], params.get("properties", {})).values():
            prop.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": params},
        }

    def parse(self, arguments: dict[str, Any]) -> BaseModel:
        return self.args_model.model_validate(arguments)

    async def run(self, ctx: ToolContext, args: BaseModel) -> str:
        return await self.fn(ctx, **dict(args))


def describe_validation_error(err: ValidationError) -> str:
    parts: list[str] = []
    for e in err.errors()[:5]:
        loc = ".".join(str(p) for p in e["loc"]) or "arguments"
        parts.append(f"{loc}: {e['msg']}")
    return "; ".join(parts)


def tool(
    name: str,
    description: str,
    *,
    settings: type[ToolSettings] = ToolSettings,
    guard: GuardFn | None = None,
    timeout: float = 30.0,
    side_effects: bool = False,
) -> Callable[[ToolFn], Tool]:
    """Turn `async def fn(ctx, a: int, b: str = "x") -> str` into a Tool with a schema for a and b."""

    def wrap(fn: ToolFn) -> Tool:
        fields: dict[str, Any] = {}
        for pname, param in list(inspect.signature(fn).parameters.items())[1:]:
            if param.annotation is inspect.Parameter.empty:
                raise TypeError(f"tool {name}: parameter {pname} needs a type annotation")
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (param.annotation, default)
        model_name = "".join(p.capitalize() for p in name.split("_")) + "Args"
        args_model = create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)
        return Tool(name, description, args_model, fn, settings, guard, timeout, side_effects)

    return wrap


def require(condition: bool, message: str) -> None:
    """Fail a tool call with a message the model reads (not retried)."""
    if not condition:
        raise ToolFailed(message)
