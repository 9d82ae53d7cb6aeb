"""The ReAct loop: the model decides, we run the tools it asks for, feed the results back, repeat.
Everything that happens is told to the turn's hooks; the loop itself records nothing.

Every model call takes the turn's one call path (`calls.py`): fitted to the model's window, a
context-length error compacted and retried, the budget charged. A turn ends with the model's answer, or,
when the iteration cap, a budget or the loop guard stops it (`guards.py`), with one last call without tools
in which the model says what it found.

Several tool calls in one model message run at the same time (the profile's `parallel_tool_calls: false`
turns that off), except that side-effecting calls run one at a time, in the model's order (the executor's
rule, `ToolExecutor.in_order`); a tool that `runs_alone` (notify) waits for the calls before it and runs
before those after it. The results go back to the model in the order it asked; each call is told to the hooks when it
starts and when it finishes, with its own start and finish times.

A gated call whose turn can park (`RunContext.parks`) ends the run with `TurnParked` once its group has
finished: the state goes to the store, and `resume` goes on from it when the call is decided (parked.py).

Everything a run changes is its `TurnState` (state.py); the loop itself keeps nothing per turn."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import replace
from typing import Any

from bot.engine import replies
from bot.engine.context.prompt import PromptBuilder
from bot.engine.context.tokens import Calibration, TokenCounter, default_window
from bot.engine.context.window import SummaryStore, ThreadWindow
from bot.engine.errors import ApprovalPending, ModelError
from bot.engine.guard import neutralise, untrusted
from bot.engine.messages import ImagePart, Message, Stop, StopReason, Thread, ToolCall, ToolResult, TurnOutcome
from bot.engine.model.retrying import RetryingModel
from bot.engine.model.wire import ModelAttempt
from bot.engine.run.calls import CallSettings, ModelCalls
from bot.engine.run.context import RunContext
from bot.engine.run.executor import ToolExecutor
from bot.engine.run.guarding import TurnGuard
from bot.engine.run.guards import LOOP_STOP, GuardVerdict, LoopGuard, PriceOf
from bot.engine.run.hooks import TurnHooks
from bot.engine.run.parked import ParkedTurn, TurnParked
from bot.engine.run.spend import SpendReached
from bot.engine.run.state import TurnState


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

    async def calls(self, run: RunContext, thread: Thread, hooks: TurnHooks) -> ModelCalls:
        """The turn's model-call path on `thread` (the planner asks for one and shares it with its steps)."""
        profile = run.profile
        model = profile.model or self.default_model

        guard = TurnGuard(run, hooks, self.executor.secrets)
        held = guard.stream()  # the output guardrails let streamed text through a sentence at a time

        async def report(attempt: ModelAttempt) -> None:
            held.reset()
            await hooks.model_attempt(run, guard.scrubbed(attempt))

        async def delta(fragment: str) -> None:
            if shown := held.feed(fragment):
                await hooks.text_delta(run, shown)

        window = ThreadWindow(thread, spec=profile.context, window=profile.context_window or default_window(model),
                              model=model, counter=self.counter(model), calibration=self.calibration,
                              store=self.summaries, session_id=run.session_id, turn_id=run.turn_id)
        settings = CallSettings(model, profile.temperature, report, delta, profile.context.summary_words, run.spend)
        system = await self.prompts.system_message(profile, run.scope, run.memories)
        return ModelCalls(self.model, settings, system, window)

    def state(self, run: RunContext, calls: ModelCalls, hooks: TurnHooks,
              schemas: tuple[dict[str, Any], ...] = ()) -> TurnState:
        """A new turn's state (plan mode asks for one for its planning calls)."""
        return TurnState(run, hooks, calls, schemas, self.price, LoopGuard(run.profile.loop_repeats))

    async def run(self, run: RunContext, history: Sequence[Message] | Thread, text: str | Message,
                  hooks: TurnHooks) -> TurnOutcome:
        """`history`: the thread as the store loads it, or plain messages (the last `max_history_turns`)."""
        return await self.run_with(run, await self.calls(run, self._thread(run, history), hooks), text, hooks)

    async def resume(self, run: RunContext, history: Sequence[Message] | Thread, parked: ParkedTurn,
                     hooks: TurnHooks, images: tuple[ImagePart, ...] = ()) -> TurnOutcome:
        """Go on with a turn that parked on an approval: its pending calls first (the gate has the decision
        now), then the loop as usual. `history`: the thread before this turn. `images`: the user's attached
        images, read again (the stored state keeps text only), put back on the turn's first message."""
        calls = await self.calls(run, self._thread(run, history), hooks)
        t = self._new_turn(run, calls, hooks)
        t.restore(parked)
        if images and t.messages and t.messages[0].role == "user":
            t.messages[0] = replace(t.messages[0], images=images)
        stop = await self._tools(t, parked.pending_calls(), parked.done)
        return await self._finish(t, stop) if stop is not None else await self._steps(t)

    @staticmethod
    def _thread(run: RunContext, history: Sequence[Message] | Thread) -> Thread:
        thread = history if isinstance(history, Thread) else Thread.from_messages(history)
        if not isinstance(history, Thread) and len(thread.turns) > run.profile.max_history_turns:
            thread.turns = thread.turns[len(thread.turns) - run.profile.max_history_turns:]
        return thread

    def _new_turn(self, run: RunContext, calls: ModelCalls, hooks: TurnHooks) -> TurnState:
        profile, tools = run.profile, self.executor.tools_for(run.profile)
        return self.state(run, calls, hooks, tuple(tools[name].schema() for name in profile.tools if name in tools))

    async def run_with(self, run: RunContext, calls: ModelCalls, text: str | Message, hooks: TurnHooks) -> TurnOutcome:
        """A run on a call path the caller made (a plan step): the thread is the one `calls` holds; the run
        has its own budget and iteration cap (`run.profile`)."""
        t = self._new_turn(run, calls, hooks)
        await self._add(t, text if isinstance(text, Message) else Message.user(text))  # a Message: with files
        return await self._steps(t)

    async def _steps(self, t: TurnState) -> TurnOutcome:
        profile = t.run.profile
        while True:
            stop = t.exceeded()
            if stop is not None:
                return await self._finish(t, stop)
            if t.iterations >= profile.max_iterations:
                return await self._finish(t, Stop("iteration_limit", f"reached the step limit of this agent "
                                                                     f"({profile.max_iterations} model calls)"))
            t.iterations += 1
            try:
                response = await t.calls.complete(t.messages, t.schemas, charge=t)
            except SpendReached as reached:  # no more calls: the sentence says which cap
                t.iterations -= 1  # this one was not made
                return await self._spent(t, reached.stop)
            except ModelError as err:
                answer = replies.model_failed(err)
                await self._add(t, Message.assistant(answer))
                return t.outcome(answer, "error", str(err))
            if not response.message.tool_calls:
                return await self._answer(t, response.message, "answer")
            message, t.withheld = await TurnGuard(t.run, t.hooks, self.executor.secrets).calls(response.message)
            await self._add(t, message)
            stop = await self._tools(t, message.tool_calls)
            if stop is not None:
                return await self._finish(t, stop)

    async def _tools(self, t: TurnState, calls: Sequence[ToolCall], done: dict[str, str] | None = None) -> Stop | None:
        """Run the calls the model asked for (a group at a time, see `batches`), unless a budget or the loop
        guard says stop; every call gets a result message, in the model's order, either way (a call without
        one makes the next request invalid). `done`: calls that ran before the turn parked (their results).
        A group with a call waiting for an approval parks the turn once the group's other calls have finished."""
        stop: Stop | None = None
        done = done or {}
        for batch in self.batches(calls, t.run.profile.parallel_tool_calls):
            planned: list[GuardVerdict] = []  # verdicts of the calls of this group that run (a prefix of it)
            for call in batch:
                if stop is None:
                    stop, verdict = self._check(t, call, len(planned))
                    if stop is None:
                        planned.append(verdict)
            results = await self._run_batch(batch[: len(planned)], t, done)
            self._park_if_pending(t, batch, results, done)
            for i, call in enumerate(batch):
                if i >= len(planned):
                    reason = stop.detail if stop is not None else "the turn is ending"
                    await self._add(t, Message.tool(call.id, call.name, f"(not run: the turn is ending; {reason})"))
                    continue
                result = results[i]
                assert isinstance(result, ToolResult)
                t.results.append(result)
                if call.id not in done:
                    t.count_call()
                note = t.guard.note(call) if planned[i] == "warn" else ""
                # the tool's own output is data, between markers it cannot close, and so is a failure's text (an
                # MCP server's error result, a program's or an API's message); a refusal is our sentence, in which
                # what the model asked for (a path, a URL a redirect named) cannot spell a marker either
                content = untrusted(result.content, f"tool {call.name}") if result.status in ("ok", "error") \
                    else neutralise(result.content)
                await self._add(t, Message.tool(call.id, call.name, content + note))
        return stop

    @staticmethod
    def _park_if_pending(t: TurnState, batch: list[ToolCall], results: list[ToolResult | ApprovalPending],
                         done: dict[str, str]) -> None:
        pending = tuple(a for r in results if isinstance(r, ApprovalPending) for a in r.approvals)
        if not pending:
            return
        finished = {c.id: r.content for c, r in zip(batch, results, strict=False) if isinstance(r, ToolResult)}
        ran = sum(1 for c in finished if c not in done)
        children = {r.call_id: r.child for r in results if isinstance(r, ApprovalPending) and r.child is not None}
        raise TurnParked(t.parked({**done, **finished}, t.tool_calls + ran, pending, children))

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

    async def _run_batch(self, batch: list[ToolCall], t: TurnState,
                         done: dict[str, str]) -> list[ToolResult | ApprovalPending]:
        """Run the calls of one group at the same time (side-effecting ones one after another); their results
        in the group's order (a call waiting for an approval: its ApprovalPending). If one fails (a hook
        raised) or the turn is cancelled, the others are cancelled too."""

        async def one(call: ToolCall, slot: AbstractAsyncContextManager[None]) -> ToolResult | ApprovalPending:
            if call.id in done:  # it ran before the turn parked: recorded then
                return ToolResult(call.id, call.name, call.arguments, done[call.id], "ok")
            async with slot:  # a side-effecting call waits for the side-effecting calls before it
                await t.hooks.tool_started(t.run, call)
                try:
                    result = t.withheld.pop(call.id, None) or await self.executor.execute(call, t.run, t.iterations)
                except ApprovalPending as pending:
                    return pending
                for event in result.guarded:
                    await t.hooks.guardrail(t.run, event)
                await t.hooks.tool_finished(t.run, result)
                return result

        if len(batch) <= 1:
            return [await one(call, nullcontext()) for call in batch]
        slots = self.executor.in_order(batch, t.run)
        tasks = [asyncio.ensure_future(one(call, slot)) for call, slot in zip(batch, slots, strict=True)]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    @staticmethod
    def _check(t: TurnState, call: ToolCall, pending: int = 0) -> tuple[Stop | None, GuardVerdict]:
        """`pending`: calls of the same group already let through (they run at once with this one)."""
        stop = t.exceeded(pending)
        if stop is not None:
            return stop, "ok"
        verdict = t.guard.check(call)
        return (LOOP_STOP if verdict == "stop" else None), verdict

    @staticmethod
    async def _add(t: TurnState, message: Message) -> None:
        t.messages.append(message)
        await t.hooks.message_appended(t.run, message)

    async def _finish(self, t: TurnState, stop: Stop) -> TurnOutcome:
        """One last call without tools: the model says what it found. A fixed sentence if that fails."""
        ask = Message.user(f"[yokebot] This turn has to end now: {stop.detail}. Do not call tools. In a few "
                           "sentences, say what you found so far, what is still unknown, and what I could "
                           "ask next to continue.")
        answer = ""
        try:
            response = await t.calls.complete([*t.messages, ask], (), "final", charge=t)
            answer = response.message.content.strip()
        except SpendReached as reached:
            return await self._spent(t, reached.stop)
        except ModelError:
            pass
        answer = answer or replies.stopped_early(t.iterations, stop.detail, t.results)
        return await self._answer(t, Message.assistant(answer), stop.reason)

    async def _answer(self, t: TurnState, message: Message, reason: StopReason) -> TurnOutcome:
        """The turn's answer through the output guardrails: redacted, or replaced by one sentence."""
        message, block = await TurnGuard(t.run, t.hooks, self.executor.secrets).answer(message)
        await self._add(t, message)
        return t.outcome(message.content, "guardrail" if block is not None else reason)

    async def _spent(self, t: TurnState, stop: Stop) -> TurnOutcome:
        """A spend cap ended the turn (spend.py): its sentence is the answer; no last call."""
        await self._add(t, Message.assistant(stop.detail))
        return t.outcome(stop.detail, stop.reason)
