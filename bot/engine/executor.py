"""ToolExecutor: look up, parse and validate arguments, sandbox check, run with a timeout, retry what is
retryable (tenacity), wrap as a ToolResult with its output redacted and capped. Every failure becomes a
tool message the model can read. Recording the call is the hooks' job (the loop reports each result)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from pydantic import BaseModel, ValidationError
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from bot.engine.context import RunContext, ToolContext
from bot.engine.errors import ToolDenied, ToolFailed, ToolRetry
from bot.engine.messages import ToolCall, ToolResult, ToolStatus
from bot.engine.profiles import AgentProfile
from bot.engine.tooling import Tool, describe_validation_error
from bot.redact import cut

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    max_attempts: int = 3
    backoff_seconds: float = 0.2
    max_output_chars: int = 16_000


def identity(text: str) -> str:
    return text


class ToolExecutor:
    def __init__(
        self,
        registry: Mapping[str, Tool[Any]],
        policy: ToolPolicy | None = None,
        redact: Callable[[str], str] = identity,
    ) -> None:
        self.registry = registry
        self.policy = policy or ToolPolicy()
        self.redact = redact

    def tools_for(self, profile: AgentProfile) -> dict[str, Tool[Any]]:
        return {name: self.registry[name] for name in profile.tools if name in self.registry}

    async def execute(self, call: ToolCall, run: RunContext, reply: int = 0) -> ToolResult:
        started = time.perf_counter()
        result = await self._execute(call, run, reply)
        return replace(
            result,
            content=self._cap(result.content),
            arguments=self._redact_args(result.arguments),
            duration_ms=(time.perf_counter() - started) * 1000,
        )

    # --- sandbox (issue 12): redact before cutting, and the audit row's arguments too ---------------------
    def _cap(self, text: str) -> str:
        head, was_cut = cut(text, self.policy.max_output_chars, self.redact)
        if not was_cut:
            return head
        return f"{head}\n[output cut: about {len(text) - len(head)} more characters were not shown]"

    def _redact_args(self, args: Any) -> Any:
        if isinstance(args, str):
            return self.redact(args)
        if isinstance(args, dict):
            return {k: self._redact_args(v) for k, v in cast(dict[str, Any], args).items()}
        return args

    async def _execute(self, call: ToolCall, run: RunContext, reply: int = 0) -> ToolResult:
        def fail(text: str, args: Any = call.arguments) -> ToolResult:
            return ToolResult(call.id, call.name, args, text, "error")

        tools = self.tools_for(run.profile)
        tool = tools.get(call.name)
        if tool is None:
            available = ", ".join(sorted(tools)) or "none"
            return fail(f"Error: there is no tool named {call.name!r}. Available tools: {available}.")
        try:
            raw: Any = json.loads(call.arguments) if call.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return fail(f"Error: the arguments for {call.name} are not valid JSON ({exc.msg}). "
                        "Send a JSON object that fits the tool's schema.")
        if not isinstance(raw, dict):
            return fail(f"Error: the arguments for {call.name} must be a JSON object.")
        raw = cast(dict[str, Any], raw)
        try:
            args = tool.parse(raw)
        except ValidationError as exc:
            return fail(f"Error: invalid arguments for {call.name}: {describe_validation_error(exc)}.", raw)
        ctx = ToolContext(run, run.profile.tools[call.name], redact=self.redact, reply=reply)
        try:
            if tool.guard is not None:
                await tool.guard(ctx, args)
        except ToolDenied as exc:
            return self._denied(call, raw, exc, 1)
        return await self._run_with_retries(tool, ctx, args, call, raw)

    def _denied(self, call: ToolCall, raw: Any, exc: ToolDenied, attempts: int) -> ToolResult:
        text = f"Denied by the sandbox: {exc.reason}."
        if exc.allowed:
            text += f" Allowed: {exc.allowed}."
        return ToolResult(call.id, call.name, raw, text, "denied", attempts=attempts, reason=exc.reason)

    async def _run_with_retries(
        self, tool: Tool[Any], ctx: ToolContext[Any], args: BaseModel, call: ToolCall, raw: Any
    ) -> ToolResult:
        """ToolRetry is retried with exponential backoff; everything else ends the call at once."""
        timeout: float = ctx.settings.timeout or tool.timeout
        attempts = 0

        def result(text: str, status: ToolStatus = "error") -> ToolResult:
            return ToolResult(call.id, call.name, raw, text, status, attempts=attempts)

        async def once() -> str:
            nonlocal attempts
            attempts += 1
            return await asyncio.wait_for(tool.run(ctx, args), timeout)

        retrying = AsyncRetrying(
            stop=stop_after_attempt(ctx.settings.max_attempts or self.policy.max_attempts),
            wait=wait_exponential(multiplier=self.policy.backoff_seconds),
            retry=retry_if_exception_type(ToolRetry), reraise=True,
        )
        try:
            return result(await retrying(once), "ok")
        except ToolDenied as exc:
            return self._denied(call, raw, exc, attempts)
        except ToolFailed as exc:
            return result(f"Error: {exc}")
        except ToolRetry as exc:
            return result(f"Error: {exc} (gave up after {attempts} attempts)")
        except TimeoutError:
            return result(f"Error: {call.name} timed out after {timeout:g} s.")
        except Exception as exc:
            log.warning("tool %s raised", call.name, exc_info=True)
            return result(f"Error: {call.name} failed: {type(exc).__name__}: {exc}")
