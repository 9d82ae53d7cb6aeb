"""The `delegate` tool: an agent hands a sub-task to another agent (docs/delegation.md).

    parent's model ─ delegate {agent, task} ─> ToolExecutor (parse, timeout, redaction, cap: like any tool)
      └─ here: allowed? a cycle? too deep? an empty task, or one larger than the sub-agent's window?
           (each refused as one sentence the parent's model reads)
         └─ RunContext.delegation.runner.run_child (bot/engine/children.py): a child turn of its own profile,
            session and context (only the task), on the parent's budget (tree.py), its approvals asked through
            the parent's gate (`ChildGate`), its tool steps shown under the parent's call (`ChildSteps`)
      <─ the sub-agent's answer is the call's result; a failure is an observation and the parent goes on

A profile with `delegate:` gets the tool (the loader adds its settings, `DelegateSettings`); its schema lists
the allowed agents' names and descriptions. Several `delegate` calls of one model reply run at once, unless a
sub-agent could change something (a side-effecting tool of its, or of its own sub-agents): then it is a
side-effecting call, one at a time, like notify (`ToolExecutor.in_order`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any, cast

from pydantic import ConfigDict, Field, JsonValue, create_model

from bot.engine.context.tokens import default_window
from bot.engine.errors import ToolFailed
from bot.engine.messages import ToolCall, ToolResult, TurnOutcome
from bot.engine.run.approval import ApprovalDecision, ApprovalRequest
from bot.engine.run.context import RunContext, ToolContext
from bot.engine.run.hooks import TurnHooks
from bot.engine.run.tooling import Tool
from bot.engine.spec.delegation import DELEGATE, DelegateSettings

DESCRIPTION = ("Hand a sub-task to another agent. It works on it alone, with its own tools, in a fresh context "
               "that holds only `task`, and answers with what it found; that answer is this call's result. Write "
               "the task so it stands on its own (what to look at, what to report): the agent sees nothing else "
               "of this conversation. Several delegate calls in one reply run at the same time.")
ANSWER_NOTE = {"iteration_limit": "it ran out of steps", "loop": "it kept repeating the same calls",
               "budget:tool_calls": "the tool-call budget ran out", "budget:tokens": "the token budget ran out",
               "budget:seconds": "the time budget ran out", "budget:cost": "the cost budget ran out"}
CALL_ID_CHARS = 128  # the approvals row's call id: the path of calls from the root's down to the gated one


def listing(settings: DelegateSettings) -> str:
    return "; ".join(f"{a.name} ({a.description})" if a.description else a.name for a in settings.agents)


_TOOLS: dict[int, tuple[DelegateSettings, Tool[DelegateSettings]]] = {}  # by the settings' identity (frozen)


def delegate_tool(settings: DelegateSettings) -> Tool[DelegateSettings]:
    """The tool for one profile's `delegate:` list (its schema names the agents; made once per profile)."""
    cached = _TOOLS.get(id(settings))
    if cached is not None and cached[0] is settings:
        return cached[1]
    names: list[JsonValue] = list(settings.names())
    args = create_model(
        "DelegateArgs", __config__=ConfigDict(extra="forbid"),
        agent=(str, Field(description="which agent does it: " + listing(settings), json_schema_extra={"enum": names})),
        task=(str, Field(description="the sub-task, complete and self-contained")),
    )
    made = Tool(DELEGATE, f"{DESCRIPTION} Agents: {listing(settings)}.", args, _delegate, DelegateSettings,
                timeout=settings.timeout or 600.0)
    if len(_TOOLS) >= 256:
        _TOOLS.clear()
    _TOOLS[id(settings)] = (settings, made)
    return made


async def _delegate(ctx: ToolContext[DelegateSettings], agent: str, task: str) -> str:
    here = ctx.run.delegation
    if here is None:
        raise ToolFailed("sub-agents cannot be reached from this turn")
    allowed = ctx.settings.names()
    if agent not in allowed:
        raise ToolFailed(f"there is no sub-agent named {agent!r} here. This agent may hand work to: "
                         f"{listing(ctx.settings)}")
    if agent in here.agents:
        chain = " → ".join((*here.agents, agent))
        raise ToolFailed(f"not run: handing this to {agent} would go in a circle ({chain}). Do it with your own "
                         "tools, or answer with what you have")
    if here.depth + 1 > here.tree.max_depth:
        raise ToolFailed(f"not run: sub-agents may go only {here.tree.max_depth} level(s) deep here "
                         f"(max_delegation_depth of {here.agents[0]}), and {agent} would be level {here.depth + 1}. "
                         "Do it with your own tools")
    task = task.strip()
    if not task:
        raise ToolFailed(f"the task is empty: say what {agent} should do, with everything it needs to know")
    profile = here.runner.profile(agent)
    model = profile.model or ""
    window = profile.context_window or default_window(model)
    room = window - min(window // 8, 4096) - here.runner.tokens(model, profile.system_prompt)
    size = here.runner.tokens(model, task)
    if size > room:
        raise ToolFailed(f"the task is about {size:,} tokens, more than {agent}'s context window can take "
                         f"({max(room, 0):,}); give it a shorter task (it can read files and logs itself)")
    here.tree.running += 1  # one of the parent's tool calls from now on: what the child may use is what is left
    try:
        outcome = await here.runner.run_child(ctx.run, ctx.call_id, profile, task)
    finally:
        here.tree.running -= 1
    return answer_of(agent, outcome)


def answer_of(agent: str, outcome: TurnOutcome) -> str:
    """The parent's observation: the sub-agent's answer, and why it stopped when it stopped early."""
    if outcome.stopped_by == "error" and not outcome.answer:
        raise ToolFailed(f"{agent} failed: {outcome.error or 'no answer'}. Go on without it, or try another way")
    answer = outcome.answer.strip() or "(it gave no answer)"
    why = ANSWER_NOTE.get(outcome.stopped_by)
    if why is None and outcome.stopped_by.startswith("budget:"):  # a spend cap (spend.py)
        why = f"a spend cap was reached ({outcome.stopped_by.removeprefix('budget:')})"
    if outcome.stopped_by == "error":
        why = f"its model failed ({outcome.error})" if outcome.error else "its model failed"
    return f"{answer}\n\n[{agent} stopped before it finished: {why}]" if why else answer


def side_effects(call: ToolCall, run: RunContext | None) -> bool:
    """Could this `delegate` call change something (its sub-agent has a side-effecting tool)? An argument that
    names no agent runs nothing."""
    if run is None or run.delegation is None:
        return False
    try:
        args: Any = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError):
        return False
    agent = cast(dict[str, Any], args).get("agent") if isinstance(args, dict) else None
    if not isinstance(agent, str) or agent not in run.profile.delegate:
        return False
    return run.delegation.runner.side_effects(agent)


def approval_call_id(parent_call: str, call_id: str) -> str:
    """A sub-agent's gated call as its tree's root knows it: the path of calls (kept short for the row)."""
    path = f"{parent_call}/{call_id}"
    if len(path) <= CALL_ID_CHARS:
        return path
    return f"{path[:40]}…{hashlib.sha256(path.encode()).hexdigest()[:40]}"


@dataclass(frozen=True, slots=True)
class ChildGate:
    """A sub-agent's `ApprovalGate`: its gated calls are asked through its parent's gate, as the parent's turn
    (same thread, same humans; a parked request wakes the tree's root), naming the sub-agent and its task."""

    parent: RunContext
    call_id: str  # the parent's delegate call
    task: str

    async def decide(self, run: RunContext, request: ApprovalRequest) -> ApprovalDecision:
        gate = self.parent.approvals
        if gate is None:
            return ApprovalDecision("refused", note=f"{request.tool} needs a human's approval, and nobody can be "
                                    "asked from here.")
        asked = replace(request, call_id=approval_call_id(self.call_id, request.call_id),
                        via=request.via or (run.agent, self.task))
        return await gate.decide(self.parent, asked)

    async def ran(self, decision: ApprovalDecision, status: str) -> None:
        if self.parent.approvals is not None:
            await self.parent.approvals.ran(decision, status)


class ChildSteps(TurnHooks):
    """A sub-agent's turn as its parent call's own hooks hear it (live progress, the terminal's view, the inbox's
    record of side effects): its tool calls, nothing else. Its streamed text is not the parent's answer, and its
    start and end are not the turn's. The app's standing hooks (recorder, metrics, traces) hear all of it."""

    def __init__(self, hooks: TurnHooks) -> None:
        self.hooks = hooks

    async def tool_started(self, run: RunContext, call: ToolCall) -> None:
        await self.hooks.tool_started(run, call)

    async def tool_finished(self, run: RunContext, result: ToolResult) -> None:
        await self.hooks.tool_finished(run, result)
