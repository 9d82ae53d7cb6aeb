"""Plan-and-execute (`mode: plan` in AGENT.md): one model call writes a short numbered plan, each step then
runs through the ReAct loop with its own iteration budget, a failed step may trigger one replanning, and the
answer reports what each step found. The plan, its steps and replans are recorded with the turn."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from bot.engine.errors import ModelError
from bot.engine.executor import RunContext
from bot.engine.loop import Emit, LoopResult, Observe, ReActLoop
from bot.engine.messages import Message
from bot.engine.model import CallMeta, ModelRequest

StepStatus = Literal["pending", "done", "failed", "skipped"]
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


class PlanRecorder(Protocol):
    async def record_plan(self, turn_id: str, plan: dict[str, Any]) -> None: ...


@dataclass
class PlanStep:
    number: int
    text: str
    status: StepStatus = "pending"
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
    """Same call shape as ReActLoop.run, so AgentService picks one or the other by the profile's mode."""

    def __init__(self, loop: ReActLoop, recorder: PlanRecorder | None = None) -> None:
        self.loop, self.recorder = loop, recorder

    async def _ask_plan(self, run: RunContext, messages: list[Message], out: LoopResult) -> list[str]:
        profile = run.profile
        system = await self.loop.prompts.system_message(profile, run.scope)
        request = ModelRequest(profile.model or self.loop.default_model, (system, *messages), (),
                               profile.temperature)
        out.iterations += 1
        response = await self.loop.model.complete(request, CallMeta(run.session_id, run.turn_id, profile.name))
        out.usage += response.usage
        return parse_plan(response.message.content, profile.plan.max_steps)

    async def run(self, run: RunContext, history: list[Message], text: str, emit: Emit,
                  observe: Observe | None = None) -> LoopResult:
        spec, out, plan = run.profile.plan, LoopResult(answer=""), Plan()
        await emit(Message.user(text))
        try:
            steps = await self._ask_plan(run, [*history, Message.user(text),
                                               Message.user(PLAN_PROMPT.format(n=spec.max_steps))], out)
        except ModelError as err:
            return await self._failed(out, emit, str(err))
        plan.steps = [PlanStep(i, s) for i, s in enumerate(steps or [text], 1)]
        await emit(Message.assistant("Plan:\n" + plan.listing()))
        stopped = await self._execute(run, history, text, plan, out, emit, observe)
        out.answer = compose_answer(plan, stopped)
        await emit(Message.assistant(out.answer))
        if self.recorder is not None:
            await self.recorder.record_plan(run.turn_id, plan.to_dict())
        return out

    async def _failed(self, out: LoopResult, emit: Emit, error: str) -> LoopResult:
        out.error = error
        out.answer = f"Sorry, I could not finish this: {error}. Please try again later."
        await emit(Message.assistant(out.answer))
        return out

    async def _execute(self, run: RunContext, history: list[Message], text: str, plan: Plan, out: LoopResult,
                       emit: Emit, observe: Observe | None) -> str | None:
        """Run the steps in order; returns why it stopped early, if it did."""
        profile, i = run.profile, 0
        while i < len(plan.steps):
            step = plan.steps[i]
            budget = min(profile.plan.step_max_iterations, profile.max_iterations - out.iterations)
            if budget <= 0:
                out.hit_iteration_limit = True
                self._skip_rest(plan, i)
                return f"I stopped at the limit of {profile.max_iterations} model calls for this agent."
            step_run = replace(run, profile=replace(profile, max_iterations=budget))
            args = (step_run, history, step_prompt(text, plan, step), emit)
            res = await (self.loop.run(*args, observe) if observe else self.loop.run(*args))
            out.iterations += res.iterations
            out.usage += res.usage
            out.tool_results.extend(res.tool_results)
            step.iterations, step.finding = res.iterations, res.answer
            step.status = "failed" if res.hit_iteration_limit or res.error else "done"
            if res.error:
                out.error = res.error
                self._skip_rest(plan, i + 1)
                return f"Step {step.number} failed: {res.error}"
            if step.status == "failed" and len(plan.replans) < profile.plan.max_replans:
                await self._replan(run, history, text, plan, step, out, emit)
            i += 1
        return None

    async def _replan(self, run: RunContext, history: list[Message], text: str, plan: Plan, step: PlanStep,
                      out: LoopResult, emit: Emit) -> None:
        why = f"it used its {step.iterations} model calls without an answer"
        if run.profile.max_iterations - out.iterations <= 0:
            return
        ask = REPLAN_PROMPT.format(number=step.number, step=step.text, why=why, found=findings(plan),
                                   n=run.profile.plan.max_steps)
        try:
            new = await self._ask_plan(run, [*history, Message.user(text), Message.user(ask)], out)
        except ModelError:
            return
        kept = [s for s in plan.steps if s.status != "pending"]
        plan.steps = kept + [PlanStep(len(kept) + n, s) for n, s in enumerate(new, 1)]
        plan.replans.append(Replan(step.number, why, tuple(new)))
        await emit(Message.assistant(f"Revised plan after step {step.number}:\n" + plan.listing()))

    @staticmethod
    def _skip_rest(plan: Plan, start: int) -> None:
        for s in plan.steps[start:]:
            if s.status == "pending":
                s.status = "skipped"
