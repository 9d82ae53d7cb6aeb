"""The ReAct loop: the model decides, we run the tools it asks for, feed the results back, repeat.

Every prompt is fitted to the model's window first (`window.py`); a context-length error compacts and
retries. A turn ends with the model's answer, or, when the iteration cap, a budget or the loop guard
stops it (`guards.py`), with one last call without tools in which the model says what it found."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.engine.compaction import Compactor
from bot.engine.errors import ContextOverflow, ModelError
from bot.engine.executor import RunContext, ToolExecutor
from bot.engine.guards import LoopGuard, PriceOf, TurnBudget
from bot.engine.messages import Message, ModelResponse, ToolCall, ToolResult, Usage
from bot.engine.model import CallMeta, ChatModel, ModelRequest
from bot.engine.prompt import PromptBuilder
from bot.engine.tokens import Calibration, TokenCounter, default_window
from bot.engine.window import Fitted, SummaryStore, Thread, TurnContext

# model errors that waiting does not fix: the answer names the setting instead of "try again later"
CONFIGURATION_ERRORS = frozenset({"not_found", "auth", "insufficient_quota", "context_length_exceeded"})
OVERFLOW_RETRIES = 2  # a retry after compacting; a second, squeezed harder, if the first still overflowed


@dataclass(frozen=True, slots=True)
class LoopEvent:
    kind: str  # "model", "tool_start", "tool_end"
    iteration: int
    call: ToolCall | None = None
    result: ToolResult | None = None


Emit = Callable[[Message], Awaitable[None]]
Observe = Callable[[LoopEvent], Awaitable[None]]


@dataclass
class LoopResult:
    answer: str
    iterations: int = 0
    hit_iteration_limit: bool = False
    tool_results: list[ToolResult] = field(default_factory=lambda: list[ToolResult]())
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    stopped_by: str = "answer"  # answer | iteration_limit | loop | budget:<which> | error
    compactions: int = 0


async def _noop(_: LoopEvent) -> None:
    return None


@dataclass
class _Turn:
    """The state of one run of the loop."""

    run: RunContext
    ctx: TurnContext
    system: Message
    schemas: tuple[dict[str, Any], ...]
    model: str
    meta: CallMeta
    messages: list[Message]
    out: LoopResult
    guard: LoopGuard
    budget: TurnBudget
    emit: Emit
    observe: Observe


class ReActLoop:
    def __init__(self, model: ChatModel, executor: ToolExecutor, prompts: PromptBuilder, default_model: str, *,
                 summaries: SummaryStore | None = None, price: PriceOf | None = None,
                 calibration: Calibration | None = None) -> None:
        self.model, self.executor, self.prompts, self.default_model = model, executor, prompts, default_model
        self.summaries, self.price = summaries, price
        self.calibration = calibration or Calibration()
        self._counters: dict[str, TokenCounter] = {}

    def counter(self, model: str) -> TokenCounter:
        if model not in self._counters:
            self._counters[model] = TokenCounter(model)
        return self._counters[model]

    def _context(self, run: RunContext, thread: Thread, model: str, meta: CallMeta) -> TurnContext:
        profile, counter = run.profile, self.counter(model)
        compactor = Compactor(self.model, model, meta, counter, profile.context.summary_words)
        return TurnContext(thread, spec=profile.context, window=profile.context_window or default_window(model),
                           model=model, counter=counter, calibration=self.calibration, summarise=compactor,
                           store=self.summaries, session_id=run.session_id, turn_id=run.turn_id)

    async def run(
        self, run: RunContext, history: Sequence[Message] | Thread, text: str, emit: Emit, observe: Observe = _noop
    ) -> LoopResult:
        profile, tools = run.profile, self.executor.tools_for(run.profile)
        model = profile.model or self.default_model
        meta = CallMeta(run.session_id, run.turn_id, profile.name)
        thread = history if isinstance(history, Thread) else Thread.from_messages(history)
        if not isinstance(history, Thread) and len(thread.turns) > profile.max_history_turns:
            thread.turns = thread.turns[len(thread.turns) - profile.max_history_turns:]
        schemas = tuple(tools[name].schema() for name in profile.tools if name in tools)
        system = await self.prompts.system_message(profile, run.scope)
        t = _Turn(run, self._context(run, thread, model, meta), system, schemas, model, meta, [Message.user(text)],
                  LoopResult(answer=""), LoopGuard(profile.loop_repeats), TurnBudget(profile.budget, self.price),
                  emit, observe)
        await emit(t.messages[0])
        try:
            return await self._steps(t)
        finally:
            t.out.compactions = t.ctx.compactions

    async def _steps(self, t: _Turn) -> LoopResult:
        out, profile = t.out, t.run.profile
        while True:
            which = t.budget.exceeded(out.usage, len(out.tool_results))
            if which is not None:
                return await self._finish(t, f"budget:{which}", "reached " + t.budget.describe(
                    which, out.usage, len(out.tool_results)))
            if out.iterations >= profile.max_iterations:
                return await self._finish(t, "iteration_limit", f"reached the step limit of this agent "
                                                               f"({profile.max_iterations} model calls)")
            out.iterations += 1
            try:
                response = await self._call(t, t.messages, t.schemas)
            except ModelError as err:
                return await self._failed(t, err)
            t.messages.append(response.message)
            await t.emit(response.message)
            await t.observe(LoopEvent("model", out.iterations))
            if not response.message.tool_calls:
                out.answer = response.message.content
                return out
            stop = await self._tools(t, response.message.tool_calls)
            if stop is not None:
                return await self._finish(t, *stop)

    async def _call(self, t: _Turn, messages: Sequence[Message], schemas: tuple[dict[str, Any], ...],
                    purpose: str = "turn") -> ModelResponse:
        """One model call on a fitted prompt; a context-length error compacts and retries."""
        fitted: Fitted = await t.ctx.prepare(t.system, messages, schemas)
        temperature = t.run.profile.temperature
        for attempt in range(OVERFLOW_RETRIES + 1):
            try:
                request = ModelRequest(t.model, fitted.messages, schemas, temperature, purpose)
                response = await self.model.complete(request, t.meta)
            except ContextOverflow as err:
                if attempt == OVERFLOW_RETRIES:
                    raise
                await t.ctx.recover(t.system, fitted, err.window, err.prompt_tokens)
                fitted = await t.ctx.prepare(t.system, messages, schemas)
                continue
            t.ctx.observe(fitted, response.usage.prompt_tokens)
            t.out.usage += response.usage
            t.budget.charge(t.model, response.usage)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def _tools(self, t: _Turn, calls: Sequence[ToolCall]) -> tuple[str, str] | None:
        """Run the calls the model asked for, unless a budget or the loop guard says stop; every call
        gets a result message either way (a call without one makes the next request invalid)."""
        stop: tuple[str, str] | None = None
        for call in calls:
            verdict = "ok"
            if stop is None:
                stop, verdict = self._check(t, call)
            if stop is not None:
                await self._add(t, Message.tool(call.id, call.name, f"(not run: the turn is ending; {stop[1]})"))
                continue
            await t.observe(LoopEvent("tool_start", t.out.iterations, call))
            result = await self.executor.execute(call, t.run)
            t.out.tool_results.append(result)
            note = t.guard.note(call) if verdict == "warn" else ""
            await self._add(t, Message.tool(call.id, call.name, result.content + note))
            await t.observe(LoopEvent("tool_end", t.out.iterations, call, result))
        return stop

    @staticmethod
    def _check(t: _Turn, call: ToolCall) -> tuple[tuple[str, str] | None, str]:
        which = t.budget.exceeded(t.out.usage, len(t.out.tool_results))
        if which is not None:
            return (f"budget:{which}", "reached " + t.budget.describe(which, t.out.usage,
                                                                      len(t.out.tool_results))), "ok"
        verdict = t.guard.check(call)
        if verdict == "stop":
            return ("loop", "the loop guard stopped the same tool calls coming back again and again"), verdict
        return None, verdict

    async def _add(self, t: _Turn, message: Message) -> None:
        t.messages.append(message)
        await t.emit(message)

    async def _finish(self, t: _Turn, stopped_by: str, reason: str) -> LoopResult:
        """One last call without tools: the model says what it found. A fixed sentence if that fails."""
        out = t.out
        out.stopped_by = stopped_by
        out.hit_iteration_limit = stopped_by == "iteration_limit"
        ask = Message.user(f"[yokebot] This turn has to end now: {reason}. Do not call tools. In a few "
                           "sentences, say what you found so far, what is still unknown, and what I could "
                           "ask next to continue.")
        answer = ""
        try:
            response = await self._call(t, [*t.messages, ask], (), "final")
            answer = response.message.content.strip()
        except ModelError:
            pass
        out.answer = answer or self._partial(out, reason)
        await t.emit(Message.assistant(out.answer))
        return out

    async def _failed(self, t: _Turn, err: ModelError) -> LoopResult:
        out = t.out
        out.error, out.stopped_by = str(err), "error"
        later = "" if err.code in CONFIGURATION_ERRORS else " Please try again later."
        out.answer = f"Sorry, I could not finish this: {err}.{later}"
        await t.emit(Message.assistant(out.answer))
        return out

    @staticmethod
    def _partial(out: LoopResult, reason: str) -> str:
        done = ", ".join(f"{r.tool} ({r.status})" for r in out.tool_results[-5:]) or "no tool calls"
        return (f"I stopped after {out.iterations} steps, before reaching a final answer: {reason}. "
                f"Last steps: {done}. Ask me to continue, or narrow the question.")
