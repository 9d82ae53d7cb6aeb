"""Plan-and-execute (`mode: plan` in AGENT.md): one model call writes a short numbered plan, each step then
runs through the ReAct loop with its own iteration budget, a failed step may trigger one replanning, and the
answer reports what each step found. The plan, its steps and replans are recorded with the turn."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from bot.engine import replies
from bot.engine.errors import ModelError
from bot.engine.messages import Message, Thread, TurnOutcome
from bot.engine.run.calls import ModelCalls
from bot.engine.run.context import RunContext
from bot.engine.run.guarding import TurnGuard
from bot.engine.run.hooks import TurnHooks
from bot.engine.run.loop import ReActLoop
from bot.engine.run.state import TurnState

PlanStepStatus = Literal["pending", "done", "failed", "skipped"]
_ITEM = re.compile(r"^\s*(\d{1,2})[.)]\s+(.+?)\s*$")

PLAN_PROMPT = (
    "Before you use any tool, write a short plan for the request above: a numbered list of at most {n} "
    "concrete steps (one line each, like `1. Count the 5xx in the nginx access log of the last hour`). "
    "Reply with the numbered list only."
)
REPLAN_PROMPT = (
    "Step {number} ({step}) did not finish: {why}. What the steps found so far:\n{found}\n\n"
    "Write a revised numbered list (at most {n} steps) for the work that remains. Reply with the list only."
)


@dataclass
class PlanStep:
    number: int
    text: str
    status: PlanStepStatus = "pending"
    finding: str = ""
    iterations: int = 0


@dataclass
class Replan:
    after_step: int
    reason: str
    steps: tuple[str, ...]


@dataclass
class Plan:
    steps: list[PlanStep] = field(default_factory=lambda: list[PlanStep]())
    replans: list[Replan] = field(default_factory=lambda: list[Replan]())

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": [{"number": s.number, "text": s.text, "status": s.status, "finding": s.finding,
                       "iterations": s.iterations} for s in self.steps],
            "replans": [{"after_step": r.after_step, "reason": r.reason, "steps": list(r.steps)}
                        for r in self.replans],
        }

    def listing(self) -> str:
        return "\n".join(f"{s.number}. {s.text}" for s in self.steps)


def parse_plan(text: str, max_steps: int) -> list[str]:
    steps = [m.group(2) for line in text.splitlines() if (m := _ITEM.match(line))]
    return steps[:max_steps]


def findings(plan: Plan) -> str:
    done = [f"{s.number}. {s.text}: {s.finding.strip() or '(nothing)'}" for s in plan.steps if s.status != "pending"]
    return "\n".join(done) or "(nothing yet)"


def step_prompt(request: str, plan: Plan, step: PlanStep) -> str:
    return (f"You are working through a plan for this request: {request}\n\nPlan:\n{plan.listing()}\n\n"
            f"Findings so far:\n{findings(plan)}\n\nNow do step {step.number} only: {step.text}\n"
            "Use your tools, then answer with what this step found, in a few lines.")


def compose_answer(plan: Plan, stopped: str | None) -> str:
    lines = ["Plan and findings:"]
    for s in plan.steps:
        mark = {"done": "", "failed": " (did not finish)", "skipped": " (not run)", "pending": " (not run)"}[s.status]
        finding = " ".join(s.finding.split()) if s.finding else ""
        lines.append(f"{s.number}. {s.text}{mark}" + (f": {finding}" if finding else ""))
    if plan.replans:
        lines.append(f"(replanned after step {plan.replans[-1].after_step}: {plan.replans[-1].reason})")
    if stopped:
        lines.append(stopped)
    return "\n".join(lines)


class PlanExecutor:
    """Same call shape as ReActLoop.run, so AgentService picks one or the other by the profile's mode. Every
    message, model attempt and tool call goes to the turn's hooks, the plan itself to `hooks.plan_made`."""

    def __init__(self, loop: ReActLoop) -> None:
        self.loop = loop

    async def _ask_plan(self, calls: ModelCalls, messages: list[Message], state: TurnState, max_steps: int
                        ) -> list[str]:
        """The planning call sees what a turn sees (the system prompt with the thread's summary, then the
        turns after it, then `messages`), fitted to the window like any call of the turn. Its text is not
        streamed: a plan is not the answer."""
        state.iterations += 1
        response = await calls.complete(messages, (), charge=state, stream=False)
        return parse_plan(response.message.content, max_steps)

    async def run(self, run: RunContext, history: Sequence[Message] | Thread, text: str | Message,
                  hooks: TurnHooks) -> TurnOutcome:
        """`history`: the thread (its summary and the turns after it) as the service loads it, or plain
        messages. The planning calls and every step share the turn's call path, so the thread is fitted and
        compacted once for all of them. `text` as a Message: the user's message with its attached files; the
        images in it go with the planning calls and with every step (each step's prompt repeats the
        question)."""
        spec, plan = run.profile.plan, Plan()
        thread = history if isinstance(history, Thread) else Thread.from_messages(history)
        question = text if isinstance(text, Message) else Message.user(text)
        text = question.content
        await hooks.message_appended(run, question)
        calls = await self.loop.calls(run, thread, hooks)
        # the whole plan's state: its planning calls are charged to it, each step's outcome added to it (a step
        # runs with a state of its own, like a turn of the ReAct loop)
        state = self.loop.state(run, calls, hooks)
        try:
            ask = [question, Message.user(PLAN_PROMPT.format(n=spec.max_steps))]
            steps = await self._ask_plan(calls, ask, state, spec.max_steps)
        except ModelError as err:
            answer = replies.model_failed(err)
            await hooks.message_appended(run, Message.assistant(answer))
            return state.outcome(answer, "error", str(err))
        guard = TurnGuard(run, hooks, self.loop.executor.secrets)  # the plan is the model's text: the output rules
        plan.steps = [PlanStep(i, guard.scrub("output", s)) for i, s in enumerate(steps or [text], 1)]
        await hooks.message_appended(run, Message.assistant("Plan:\n" + plan.listing()))
        stopped = await self._execute(run, calls, question, plan, state, hooks)
        answer, block = await guard.answer(Message.assistant(compose_answer(plan, stopped)))
        await hooks.message_appended(run, answer)
        await hooks.plan_made(run, plan.to_dict())
        return state.outcome(answer.content, "guardrail" if block is not None else None)

    async def _execute(self, run: RunContext, calls: ModelCalls, question: Message, plan: Plan, state: TurnState,
                       hooks: TurnHooks) -> str | None:
        """Run the steps in order; returns why it stopped early, if it did."""
        profile, i = run.profile, 0
        while i < len(plan.steps):
            step = plan.steps[i]
            budget = min(profile.plan.step_max_iterations, profile.max_iterations - state.iterations)
            if budget <= 0:
                state.stopped_by = "iteration_limit"
                self._skip_rest(plan, i)
                return f"I stopped at the limit of {profile.max_iterations} model calls for this agent."
            step_run = replace(run, profile=replace(profile, max_iterations=budget))
            await hooks.plan_step_started(run, step.number, step.text)
            prompt = Message(role="user", content=step_prompt(question.content, plan, step), images=question.images)
            res = await self.loop.run_with(step_run, calls, prompt, hooks)
            state.iterations += res.iterations
            state.usage += res.usage
            state.results.extend(res.tool_calls)
            step.iterations, step.finding = res.iterations, res.answer
            step.status = "done" if res.stopped_by == "answer" and not res.error else "failed"
            await hooks.plan_step_finished(run, step.number, step.status)
            if res.error:
                state.error, state.stopped_by = res.error, "error"
                self._skip_rest(plan, i + 1)
                return f"Step {step.number} failed: {res.error}"
            if step.status == "failed" and len(plan.replans) < profile.plan.max_replans:
                await self._replan(run, calls, question, plan, step, state, hooks)
            i += 1
        return None

    async def _replan(self, run: RunContext, calls: ModelCalls, question: Message, plan: Plan, step: PlanStep,
                      state: TurnState, hooks: TurnHooks) -> None:
        why = f"it used its {step.iterations} model calls without an answer"
        if run.profile.max_iterations - state.iterations <= 0:
            return
        spec = run.profile.plan
        ask = REPLAN_PROMPT.format(number=step.number, step=step.text, why=why, found=findings(plan),
                                   n=spec.max_steps)
        try:
            new = await self._ask_plan(calls, [question, Message.user(ask)], state, spec.max_steps)
        except ModelError:
            return
        kept = [s for s in plan.steps if s.status != "pending"]
        plan.steps = kept + [PlanStep(len(kept) + n, s) for n, s in enumerate(new, 1)]
        plan.replans.append(Replan(step.number, why, tuple(new)))
        revised = Message.assistant(f"Revised plan after step {step.number}:\n" + plan.listing())
        await hooks.message_appended(run, revised)

    @staticmethod
    def _skip_rest(plan: Plan, start: int) -> None:
        for s in plan.steps[start:]:
            if s.status == "pending":
                s.status = "skipped"
