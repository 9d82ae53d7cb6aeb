"""What a tool is: a name, a description that says WHEN to use it, a JSON schema derived from a typed
signature, and an async function that receives a per-run context (tools hold no per-run state)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, cast

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from bot.engine.errors import ToolFailed
from bot.engine.messages import Scope, ToolStatus
from bot.engine.run.context import RunContext, SettingsT, ToolContext
from bot.engine.spec.approval import ApprovalSpec
from bot.engine.spec.toolsettings import ToolSettings

__all__ = ["RunContext", "Scope", "Tool", "ToolContext", "ToolOutput", "ToolSettings", "describe_validation_error",
           "require", "tool"]


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool returns when the audit row should hold more than the model reads: `text` for the model,
    `detail` (a raw API response, say) only for `tool_invocations`. Both are redacted and capped. `status`:
    `not_posted` when the call ran but what it is for did not happen (the audit row says so)."""

    text: str
    detail: str = ""
    status: ToolStatus = "ok"


ToolFn = Callable[..., Awaitable[str | ToolOutput]]
GuardFn = Callable[[ToolContext[Any], BaseModel], Awaitable[None]]
# The approval this call needs, beyond the tool's own `approval:` (shell: the matched command rule's).
ApprovalFn = Callable[[ToolContext[Any], BaseModel], Awaitable[ApprovalSpec | None]]


@dataclass(frozen=True)
class Tool(Generic[SettingsT]):
    """`fn(ctx: ToolContext[SettingsT], **args)`; `profile_section` names a top-level profile key whose
    mapping the loader merges into the settings (notify's `notify:` policy).

    A tool is read-only unless it declares `side_effects=True`. Side-effecting calls never run at the same
    time within a turn: they run one after another in the model's order, while read-only calls run alongside
    (`ToolExecutor.in_order`). `runs_alone`: never run at the same time as any other call of the same model
    message, read-only ones included."""

    name: str
    description: str
    args_model: type[BaseModel]
    fn: ToolFn
    settings_model: type[SettingsT]
    guard: GuardFn | None = None
    timeout: float = 30.0
    profile_section: str | None = None
    # True when running it changes something outside the turn (posts, writes memory): such calls run one at a
    # time within a turn; a turn interrupted after one is not run again on recovery, the thread is told
    # instead (docs/architecture.md).
    side_effects: bool = False
    runs_alone: bool = False
    approval: ApprovalFn | None = None

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

    async def run(self, ctx: ToolContext[SettingsT], args: BaseModel) -> str | ToolOutput:
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
    settings: type[SettingsT] = ToolSettings,
    guard: GuardFn | None = None,
    timeout: float = 30.0,
    profile_section: str | None = None,
    side_effects: bool = False,
    runs_alone: bool = False,
    approval: ApprovalFn | None = None,
) -> Callable[[ToolFn], Tool[SettingsT]]:
    """Turn `async def fn(ctx, a: int, b: str = "x") -> str` into a Tool with a schema for a and b."""

    def wrap(fn: ToolFn) -> Tool[SettingsT]:
        fields: dict[str, Any] = {}
        for pname, param in list(inspect.signature(fn).parameters.items())[1:]:
            if param.annotation is inspect.Parameter.empty:
                raise TypeError(f"tool {name}: parameter {pname} needs a type annotation")
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (param.annotation, default)
        model_name = "".join(p.capitalize() for p in name.split("_")) + "Args"
        args_model = create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)
        return Tool(name, description, args_model, fn, settings, guard, timeout, profile_section, side_effects,
                    runs_alone, approval)

    return wrap


def require(condition: bool, message: str) -> None:
    """Fail a tool call with a message the model reads (not retried)."""
    if not condition:
        raise ToolFailed(message)
