"""The ReAct loop: the model decides, we run the tools it asks for, feed the results back, repeat.
Everything that happens is told to the turn's hooks; the loop itself records nothing.

Every prompt is fitted to the model's window first (`window.py`); a context-length error compacts and
retries. A turn ends with the model's answer, or, when the iteration cap, a budget or the loop guard
stops it (`guards.py`), with one last call without tools in which the model says what it found.

Several tool calls in one model message run at the same time (the profile's `parallel_tool_calls: false`
turns that off); a tool that `runs_alone` (notify) waits for the calls before it and runs before those
after it. The results go back to the model in the order it asked; each call is told to the hooks when it
starts and when it finishes, with its own start and finish times."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.engine import replies
from bot.engine.compaction import Compactor
from bot.engine.context import RunContext
from bot.engine.errors import ContextOverflow, ModelError
from bot.engine.executor import ToolExecutor
from bot.engine.guards import LoopGuard, PriceOf, TurnBudget
from bot.engine.hooks import ModelAttempt, TurnHooks
from bot.engine.messages import Message, ModelResponse, ToolCall, ToolResult, TurnOutcome, Usage
from bot.engine.prompt import PromptBuilder
from bot.engine.retrying import OnAttempt, RetryingModel
from bot.engine.tokens import Calibration, TokenCounter, default_window
from bot.engine.window import Fitted, SummaryStore, Thread, TurnContext
from bot.engine.wire import ModelRequest, OnDelta

OVERFLOW_RETRIES = 2  # a retry after compacting; a second, squeezed harder, if the first still overflowed


@dataclass
class _Turn:
    """The state of one run of the loop."""

    run: RunContext
    hooks: TurnHooks
    report: OnAttempt
    ctx: TurnContext
    system: Message
    schemas: tuple[dict[str, Any], ...]
    model: str
    guard: LoopGuard
    budget: TurnBudget
    delta: OnDelta | None = None  # the reply's text as it streams (hooks.text_delta)
    messages: list[Message] = field(default_factory=lambda: list[Message]())
    results: list[ToolResult] = field(default_factory=lambda: list[ToolResult]())
    usage: Usage = field(default_factory=Usage)
    iterations: int = 0

    def outcome(self, answer: str, stopped_by: str, error: str | None = None) -> TurnOutcome:
        return TurnOutcome(answer, self.iterations, self.usage, error, stopped_by, tuple(self.results))


class ReActLoop:
    def __init__(self, model: RetryingModel, executor: ToolExecutor, prompts: PromptBuilder, default_model: str,
                 *, summaries: SummaryStore | None = None, price: PriceOf | None = None,
                 calibration: Calibration | None = None) -> None:
        self.model, self.executor, self.prompts, self.default_model = model, executor, prompts, default_model
        self.summaries, self.price = summaries, price
        self.calibration = calibration or Calibration()
        self._counters: dict[str, TokenCounter] = {}

    def counter(self, model: str) -> TokenCounter:
        if model not in self._counters:
            self._counters[model] = TokenCounter(model)
        return self._counters[model]

    def _context(self, run: RunContext, thread: Thread, model: str, report: OnAttempt) -> TurnContext:
        profile, counter = run.profile, self.counter(model)
        compactor = Compactor(self.model, model, report, counter, profile.context.summary_words)
        return TurnContext(thread, spec=profile.context, window=profile.context_window or default_window(model),
                           model=model, counter=counter, calibration=self.calibration, summarise=compactor,
                           store=self.summaries, session_id=run.session_id, turn_id=run.turn_id)

    async def run(self, run: RunContext, history: Sequence[Message] | Thread, text: str | Message,
                  hooks: TurnHooks) -> TurnOutcome:
        profile, tools = run.profile, self.executor.tools_for(run.profile)
        model = profile.model or self.default_model
        thread = history if isinstance(history, Thread) else Thread.from_messages(history)
        if not isinstance(history, Thread) and len(thread.turns) > profile.max_history_turns:
            thread.turns = thread.turns[len(thread.turns) - profile.max_history_turns:]

        async def report(attempt: ModelAttempt) -> None:
            await hooks.model_attempt(run, attempt)

        async def delta(fragment: str) -> None:
            await hooks.text_delta(run, fragment)

        schemas = tuple(tools[name].schema() for name in profile.tools if name in tools)
        system = await self.prompts.system_message(profile, run.scope)
        t = _Turn(run, hooks, report, self._context(run, thread, model, report), system, schemas, model,
                  LoopGuard(profile.loop_repeats), TurnBudget(profile.budget, self.price), delta)
        await self._add(t, text if isinstance(text, Message) else Message.user(text))  # a Message: with files
        return await self._steps(t)

    async def _steps(self, t: _Turn) -> TurnOutcome:
        profile = t.run.profile
        while True:
            which = t.budget.exceeded(t.usage, len(t.results))
            if which is not None:
                return await self._finish(t, f"budget:{which}", "reached " + t.budget.describe(
                    which, t.usage, len(t.results)))
            if t.iterations >= profile.max_iterations:
                return await self._finish(t, "iteration_limit", f"reached the step limit of this agent "
                                                               f"({profile.max_iterations} model calls)")
            t.iterations += 1
            try:
                response = await self._call(t, t.messages, t.schemas)
            except ModelError as err:
                answer = replies.model_failed(err)
                await self._add(t, Message.assistant(answer))
                return t.outcome(answer, "error", str(err))
            await self._add(t, response.message)
            if not response.message.tool_calls:
                return t.outcome(response.message.content, "answer")
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
                response = await self.model.complete(request, t.report, t.delta)
            except ContextOverflow as err:
                if attempt == OVERFLOW_RETRIES:
                    raise
                await t.ctx.recover(t.system, fitted, err.window, err.prompt_tokens)
                fitted = await t.ctx.prepare(t.system, messages, schemas)
                continue
            t.ctx.observe(fitted, response.usage.prompt_tokens)
            t.usage += response.usage
            t.budget.charge(t.model, response.usage)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def _tools(self, t: _Turn, calls: Sequence[ToolCall]) -> tuple[str, str] | None:
        """Run the calls the model asked for (a group at a time, see `batches`), unless a budget or the loop
        guard says stop; every call gets a result message, in the model's order, either way (a call without
        one makes the next request invalid)."""
        stop: tuple[str, str] | None = None
        for batch in self.batches(calls, t.run.profile.parallel_tool_calls):
            planned: list[str] = []  # verdicts of the calls of this group that run (a prefix of it)
            for call in batch:
                if stop is None:
                    stop, verdict = self._check(t, call, len(planned))
                    if stop is None:
                        planned.append(verdict)
            results = await self._run_batch(batch[: len(planned)], t)
            for i, call in enumerate(batch):
                if i >= len(planned):
                    reason = stop[1] if stop is not None else "the turn is ending"
                    await self._add(t, Message.tool(call.id, call.name, f"(not run: the turn is ending; {reason})"))
                    continue
                t.results.append(results[i])
                note = t.guard.note(call) if planned[i] == "warn" else ""
                await self._add(t, Message.tool(call.id, call.name, results[i].content + note))
        return stop

    def batches(self, calls: Sequence[ToolCall], parallel: bool) -> list[list[ToolCall]]:
        """The calls in the model's order, cut into groups that may run at once: a call of a tool that
        runs alone is a group of its own; without `parallel` every call is."""
        groups: list[list[ToolCall]] = []
        last_alone = True
        for call in calls:
            alone = not parallel or self.executor.runs_alone(call.name)
            if alone or last_alone:
                groups.append([call])
            else:
                groups[-1].append(call)
            last_alone = alone
        return groups

    async def _run_batch(self, batch: list[ToolCall], t: _Turn) -> list[ToolResult]:
        """Run the calls of one group at the same time; their results in the group's order. If one fails
        (a hook raised) or the turn is cancelled, the others are cancelled too."""

        async def one(call: ToolCall) -> ToolResult:
            await t.hooks.tool_started(t.run, call)
            result = await self.executor.execute(call, t.run, t.iterations)
            await t.hooks.tool_finished(t.run, result)
            return result

        if len(batch) <= 1:
            return [await one(call) for call in batch]
        tasks = [asyncio.ensure_future(one(call)) for call in batch]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    @staticmethod
    def _check(t: _Turn, call: ToolCall, pending: int = 0) -> tuple[tuple[str, str] | None, str]:
        """`pending`: calls of the same group already let through (they run at once with this one)."""
        done = len(t.results) + pending
        which = t.budget.exceeded(t.usage, done)
        if which is not None:
            return (f"budget:{which}", "reached " + t.budget.describe(which, t.usage, done)), "ok"
        verdict = t.guard.check(call)
        if verdict == "stop":
            return ("loop", "the loop guard stopped the same tool calls coming back again and again"), verdict
        return None, verdict

    @staticmethod
    async def _add(t: _Turn, message: Message) -> None:
        t.messages.append(message)
        await t.hooks.message_appended(t.run, message)

    async def _finish(self, t: _Turn, stopped_by: str, reason: str) -> TurnOutcome:
        """One last call without tools: the model says what it found. A fixed sentence if that fails."""
        ask = Message.user(f"[yokebot] This turn has to end now: {reason}. Do not call tools. In a few "
                           "sentences, say what you found so far, what is still unknown, and what I could "
                           "ask next to continue.")
        answer = ""
        try:
            response = await self._call(t, [*t.messages, ask], (), "final")
            answer = response.message.content.strip()
        except ModelError:
            pass
        answer = answer or self._partial(t, reason)
        await self._add(t, Message.assistant(answer))
        return t.outcome(answer, stopped_by)

    @staticmethod
    def _partial(t: _Turn, reason: str) -> str:
        done = ", ".join(f"{r.tool} ({r.status})" for r in t.results[-5:]) or "no tool calls"
        return (f"I stopped after {t.iterations} steps, before reaching a final answer: {reason}. "
                f"Last steps: {done}. Ask me to continue, or narrow the question.")
