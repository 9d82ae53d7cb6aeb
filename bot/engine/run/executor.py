"""ToolExecutor: look up, parse and validate arguments, sandbox check, run with a timeout, retry what is
retryable (with exponential backoff), wrap as a ToolResult with its output redacted and capped. Every failure becomes a
tool message the model can read. Recording the call is the hooks' job (the loop reports each result).

The rule of side effects: a tool either is read-only or declares `side_effects=True` (`tooling.Tool`). Calls
of one model message run at the same time, except that side-effecting calls never run at once within a turn:
each waits for the side-effecting calls the model asked for before it (`in_order`), so their limits
(`max_items`, notify's) are checked and applied one call at a time, in the model's order. Read-only calls
wait for nothing."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from pydantic import BaseModel, ValidationError

from bot.engine.errors import ApprovalPending, ToolDenied, ToolFailed, ToolRetry
from bot.engine.guard import Secrets, Verdict, result_withheld, screen
from bot.engine.messages import ToolCall, ToolResult, ToolStatus
from bot.engine.run.approval import ApprovalDecision, ApprovalRequest, observation
from bot.engine.run.context import RunContext, ToolContext
from bot.engine.run.delegate import delegate_tool
from bot.engine.run.delegate import side_effects as delegate_effects
from bot.engine.run.tooling import Tool, ToolOutput, describe_validation_error
from bot.engine.spec.approval import ApprovalSpec
from bot.engine.spec.delegation import DELEGATE, DelegateSettings
from bot.engine.spec.guardrails import GuardRule
from bot.engine.spec.profiles import AgentProfile
from bot.redact import LOOKAHEAD, PATTERNS_ONLY, SecretRedactor, cut, for_model

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    max_attempts: int = 3
    backoff_seconds: float = 0.2
    max_output_chars: int = 16_000
    max_detail_chars: int = 500_000  # a tool's fuller result for the audit row (ToolOutput.detail)


def identity(text: str) -> str:
    return text


MAX_ARGUMENT_DEPTH = 64  # no tool takes arguments nested deeper; validators recurse, and 20,000 levels crash them


def nesting(value: Any) -> int:
    """How deep lists and objects nest in decoded JSON (iteratively: the check itself cannot overflow)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_ARGUMENT_DEPTH:
                return depth
            items = cast(dict[str, Any], node).values() if isinstance(node, dict) else cast(list[Any], node)
            stack.extend((item, depth + 1) for item in items)
    return deepest


@asynccontextmanager
async def _after(previous: asyncio.Event | None, done: asyncio.Event) -> AsyncGenerator[None]:
    """Wait for `previous`, then hold the slot; `done` is set however the holder ends (a cancelled call
    does not block the ones after it)."""
    try:
        if previous is not None:
            await previous.wait()
        yield
    finally:
        done.set()


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
        # what the guardrails' `secrets` rules find and replace: the app's redactor (its configured values too)
        self.secrets: Secrets = redact if isinstance(redact, SecretRedactor) else PATTERNS_ONLY

    def tools_for(self, profile: AgentProfile) -> dict[str, Tool[Any]]:
        tools = {name: self.registry[name] for name in profile.tools if name in self.registry}
        settings = profile.tools.get(DELEGATE)
        if isinstance(settings, DelegateSettings):  # `delegate:` in AGENT.md (bot/engine/run/delegate.py)
            tools[DELEGATE] = delegate_tool(settings)
        return tools

    async def execute(self, call: ToolCall, run: RunContext, reply: int = 0) -> ToolResult:
        """Every tool's result, built-in or MCP, failure or not, leaves here and nowhere else: escape sequences
        and control characters out (`for_model`, before the redactor, so a secret split by one is whole
        again), secrets redacted, then cut to size."""
        started_at, started = datetime.now(UTC), time.perf_counter()
        result = await self._execute(call, run, reply)
        duration = time.perf_counter() - started
        rules = run.profile.guardrails.tool_result
        content = await self._screened(rules, result.content, self.policy.max_output_chars)
        detail = await self._screened(rules, result.detail, self.policy.max_detail_chars) if result.detail else None
        if content.block is not None:  # the model is told it was withheld, and so is the audit
            text, detail = result_withheld(call.name, content.block), None
            result = replace(result, reason=f"result withheld by the guardrail {content.block.label}")
        else:
            text = self._cap(content.text, total=self._sliced(result.content, self.policy.max_output_chars))
        return replace(
            result,
            content=text,
            detail=self._cap(detail.text, self.policy.max_detail_chars,
                             self._sliced(result.detail or "", self.policy.max_detail_chars)) if detail else None,
            guarded=content.events,
            arguments=self._redact_args(result.arguments),
            duration_ms=duration * 1000,
            started_at=started_at,
            finished_at=started_at + timedelta(seconds=duration),
        )

    def runs_alone(self, name: str) -> bool:
        tool = self.registry.get(name)
        return tool is not None and tool.runs_alone

    def side_effects(self, name: str) -> bool:
        """Does the tool change something outside the turn? (An unknown name runs nothing: read-only.)"""
        tool = self.registry.get(name)
        return tool is not None and tool.side_effects

    def call_effects(self, call: ToolCall, run: RunContext | None = None) -> bool:
        """Does this call change something? A `delegate` call does when its sub-agent could (delegate.py)."""
        return delegate_effects(call, run) if call.name == DELEGATE else self.side_effects(call.name)

    def in_order(self, calls: Sequence[ToolCall],
                 run: RunContext | None = None) -> list[AbstractAsyncContextManager[None]]:
        """One slot per call of a group that runs at once, to hold while the call runs (its hooks too): a
        side-effecting call's slot waits until the side-effecting call before it in the group has finished;
        a read-only call's waits for nothing. A turn runs its groups one after another, so side effects
        never overlap within a turn and happen in the order the model asked for them."""
        slots: list[AbstractAsyncContextManager[None]] = []
        previous: asyncio.Event | None = None
        for call in calls:
            if not self.call_effects(call, run):
                slots.append(nullcontext())
                continue
            done = asyncio.Event()
            slots.append(_after(previous, done))
            previous = done
        return slots

    # --- sandbox: redact before cutting, and the audit row's arguments too ---------------------
    async def _screened(self, rules: tuple[GuardRule, ...], text: str, limit: int) -> Verdict:
        """The `tool_result` guardrails over what can be shown of `text`: its cut (and the redactor's lookahead),
        never the whole of a 10 MB result; escape sequences out first, so a match split by one is whole."""
        return await screen("tool_result", rules, for_model(text[: limit + LOOKAHEAD]), self.secrets)

    @staticmethod
    def _sliced(text: str, limit: int) -> int | None:
        """How long `text` was, if `_screened` read only its beginning; None: it read all of it."""
        return len(text) if len(text) > limit + LOOKAHEAD else None

    def _cap(self, text: str, limit: int | None = None, total: int | None = None) -> str:
        """`total`: how long the text was before it was sliced for the guardrails (None: it was not)."""
        head, was_cut = cut(text, limit or self.policy.max_output_chars, self.redact)
        if not was_cut and total is None:
            return head
        return f"{head}\n[output cut: about {max(total or 0, len(text)) - len(head)} more characters were not shown]"

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
        too_deep = (f"Error: the arguments for {call.name} nest deeper than {MAX_ARGUMENT_DEPTH} levels; "
                    "send them flatter.")
        try:
            raw: Any = json.loads(call.arguments) if call.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return fail(f"Error: the arguments for {call.name} are not valid JSON ({exc.msg}). "
                        "Send a JSON object that fits the tool's schema.")
        except RecursionError:
            return fail(too_deep, call.arguments[:2000])
        if nesting(raw) > MAX_ARGUMENT_DEPTH:  # before pydantic and jsonschema, which recurse
            return fail(too_deep, call.arguments[:2000])
        if not isinstance(raw, dict):
            return fail(f"Error: the arguments for {call.name} must be a JSON object.")
        raw = cast(dict[str, Any], raw)
        try:
            args = tool.parse(raw)
        except ValidationError as exc:
            return fail(f"Error: invalid arguments for {call.name}: {describe_validation_error(exc)}.", raw)
        ctx = ToolContext(run, run.profile.tools[call.name], redact=self.redact, reply=reply, call_id=call.id)
        try:
            if tool.guard is not None:
                await tool.guard(ctx, args)
            spec = await tool.approval(ctx, args) if tool.approval is not None else ctx.settings.approval
        except ToolDenied as exc:
            return self._denied(call, raw, exc, 1)
        except ToolFailed as exc:
            return fail(f"Error: {exc}", raw)
        if spec is not None:
            return await self._gated(tool, ctx, args, call, raw, spec)
        return await self._run_with_retries(tool, ctx, args, call, raw)

    async def _gated(
        self, tool: Tool[Any], ctx: ToolContext[Any], args: BaseModel, call: ToolCall, raw: Any, spec: ApprovalSpec
    ) -> ToolResult:
        """A call that needs a human: ask the turn's gate, run only if approved (at most once), and say who
        decided in the result's reason (the audit row and the trace show it)."""
        shown = self.redact(json.dumps(raw, ensure_ascii=False, sort_keys=True))
        request = ApprovalRequest(call.id, call.name, shown, spec)
        gate = ctx.run.approvals
        if gate is None:
            decision = ApprovalDecision("refused", note=f"{call.name} needs a human's approval, and nobody can "
                                        "be asked from here.")
        else:
            decision = await gate.decide(ctx.run, request)
        if not decision.approved:
            text, reason = observation(request, decision)
            return ToolResult(call.id, call.name, raw, text, "denied", attempts=0, reason=reason)
        result = await self._run_with_retries(tool, ctx, args, call, raw, max_attempts=1)  # approved once: run once
        if gate is not None:
            try:
                await gate.ran(decision, result.status)
            except Exception:
                log.warning("could not record that approved call %s ran", call.id, exc_info=True)
        approved = f"approved by {decision.by}"
        return replace(result, reason=f"{approved}; {result.reason}" if result.reason else approved)

    def _denied(self, call: ToolCall, raw: Any, exc: ToolDenied, attempts: int) -> ToolResult:
        text = f"Denied by the sandbox: {exc.reason}."
        if exc.allowed:
            text += f" Allowed: {exc.allowed}."
        return ToolResult(call.id, call.name, raw, text, "denied", attempts=attempts, reason=exc.reason)

    async def _run_with_retries(
        self, tool: Tool[Any], ctx: ToolContext[Any], args: BaseModel, call: ToolCall, raw: Any,
        max_attempts: int | None = None,
    ) -> ToolResult:
        """ToolRetry is retried with exponential backoff (base, 2 x base, ...); everything else ends the call
        at once."""
        timeout: float = ctx.settings.timeout or tool.timeout
        limit = max_attempts or ctx.settings.max_attempts or self.policy.max_attempts
        attempts = 0

        def result(text: str | ToolOutput, status: ToolStatus = "error") -> ToolResult:
            if isinstance(text, ToolOutput):
                return ToolResult(call.id, call.name, raw, text.text, text.status if status == "ok" else status,
                                  attempts=attempts, detail=text.detail or None)
            return ToolResult(call.id, call.name, raw, text, status, attempts=attempts)

        try:
            while True:
                attempts += 1
                try:
                    async with asyncio.timeout(timeout):
                        return result(await tool.run(ctx, args), "ok")
                except ToolRetry:
                    if attempts >= limit:
                        raise
                await asyncio.sleep(self.policy.backoff_seconds * 2 ** (attempts - 1))
        except ToolDenied as exc:
            return self._denied(call, raw, exc, attempts)
        except ToolFailed as exc:
            return result(f"Error: {exc}")
        except ApprovalPending:  # a sub-agent waits for a human: the turn parks with it (delegate.py)
            raise
        except ToolRetry as exc:
            return result(f"Error: {exc} (gave up after {attempts} attempts)")
        except TimeoutError:
            return result(f"Error: {call.name} timed out after {timeout:g} s.")
        except Exception as exc:
            log.warning("tool %s raised", call.name, exc_info=True)
            return result(f"Error: {call.name} failed: {type(exc).__name__}: {exc}")
