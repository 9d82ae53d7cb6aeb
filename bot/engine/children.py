"""Child turns: a sub-agent's turn for a parent's `delegate` call (docs/delegation.md; the tool and its checks
are bot/engine/run/delegate.py).

A child turn is a turn like any other, with its own row in `turns` (its parent's turn and call on it), its own
session (one per delegate call: the context holds only the task, and what its own profile adds: bootstrap,
skills, memory), its own profile (tools, sandbox roots, allow-lists, model, max_iterations). What it shares
with its parent: the thread it happens in (its `Scope`: approvals are asked there), the trigger, the services
(notifier, memory, notify ledger), the tree's budget (bot/engine/run/tree.py), and the hooks: the app's
standing hooks hear all of it (its rows, metrics, spans), the parent call's own hooks its tool calls
(`ChildSteps`). A child that waits for an approval parks with its parent: its state goes into the parent's
(`ApprovalPending.child`), and the resumed tree resumes it by the parent's call id."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from bot.engine import replies
from bot.engine.errors import ApprovalPending
from bot.engine.messages import Thread, TurnOutcome
from bot.engine.ports import MemoryStore, Notifier, NotifyLedger, SessionStore
from bot.engine.run.context import Delegation, RunContext
from bot.engine.run.delegate import ChildGate, ChildSteps
from bot.engine.run.hooks import CompositeHooks, TurnHooks
from bot.engine.run.loop import ReActLoop
from bot.engine.run.parked import ParkedTurn, TurnParked
from bot.engine.run.plan import PlanExecutor
from bot.engine.run.tree import TurnTree
from bot.engine.spec.delegation import DELEGATE
from bot.engine.spec.profiles import AgentProfile

log = logging.getLogger(__name__)

Scoped = Callable[[RunContext], AbstractAsyncContextManager[RunContext]]  # the service's `turn_scope`


def child_thread(parent_turn: str, call_id: str) -> str:
    """The child session's thread: one per delegate call, found again when a parked tree resumes."""
    return f"{parent_turn}/{call_id}"[:255]


@dataclass(frozen=True)
class ChildTurns:
    """What child turns are made of: the service's parts (one per service)."""

    store: SessionStore
    loop: ReActLoop
    profiles: Callable[[str], AgentProfile]
    hooks: CompositeHooks  # the app's standing hooks
    scoped: Scoped
    finish_later: Callable[[RunContext, TurnHooks, TurnOutcome], None]  # a cancelled turn's end, in the background
    notifier: Notifier | None = None
    memory: MemoryStore | None = None
    notify_ledger: NotifyLedger | None = None
    planner: PlanExecutor | None = None

    def root(self, profile: AgentProfile, call_hooks: TurnHooks | None,
             parked: ParkedTurn | None = None) -> Delegation | None:
        """The place of a root turn in its tree (None: its agent hands nothing on); a resumed turn gets back what
        its tree used and its parked children."""
        if DELEGATE not in profile.tools:
            return None
        tree = TurnTree(profile.budget, profile.max_delegation_depth)
        if parked is not None and parked.tree is not None:
            tree.restore(parked.tree)
        return Delegation(tree, TreeRunner(self, call_hooks), (profile.name,),
                          resume=parked.children if parked is not None else {})


class TreeRunner:
    """`SubAgents` for one tree: runs its children with the hooks of the call that started the root."""

    def __init__(self, parts: ChildTurns, call_hooks: TurnHooks | None) -> None:
        self.parts = parts
        self.hooks = parts.hooks.plus(ChildSteps(call_hooks) if call_hooks is not None else None)

    def profile(self, agent: str) -> AgentProfile:
        return self.parts.profiles(agent)

    def tokens(self, model: str, text: str) -> int:
        return self.parts.loop.counter(model or self.parts.loop.default_model).text(text)

    def side_effects(self, agent: str, seen: frozenset[str] = frozenset()) -> bool:
        profile = self.parts.profiles(agent)
        executor = self.parts.loop.executor
        if any(executor.side_effects(name) for name in profile.tools):
            return True
        return any(self.side_effects(a, seen | {agent}) for a in profile.delegate if a not in seen | {agent})

    async def run_child(self, parent: RunContext, call_id: str, profile: AgentProfile, task: str) -> TurnOutcome:
        here = parent.delegation
        assert here is not None  # only a turn in a tree has the delegate tool's runner
        stored = here.resume.get(call_id)
        parked = ParkedTurn.from_dict(stored["state"]) if stored is not None else None
        scope = parent.scope
        session = await self.parts.store.session_for(scope.platform, scope.channel,
                                                     child_thread(parent.turn_id, call_id), profile.name)
        turn_id = str(stored["turn_id"]) if stored is not None else uuid.uuid4().hex
        delegation = Delegation(here.tree, self, (*here.agents, profile.name), parent.turn_id, call_id, task,
                                resume=parked.children if parked is not None else {})
        memories = self.parts.loop.prompts.read_memory(profile, scope.channel, task)  # recalled by the task
        run = RunContext(session.id, turn_id, profile, scope, parent.trigger, self.parts.notifier, self.parts.memory,
                         ChildGate(parent, call_id, task), None, self.parts.notify_ledger, parks=parent.parks,
                         memories=memories, delegation=delegation, spend=parent.spend)  # the tree's caps
        try:
            async with self.parts.scoped(run):
                return await self._turn(run, task, parked)
        finally:
            if memories is not None and not memories.done():
                memories.cancel()

    async def _turn(self, run: RunContext, task: str, parked: ParkedTurn | None) -> TurnOutcome:
        hooks, loop, planner = self.hooks, self.parts.loop, self.parts.planner
        if parked is None:
            await hooks.turn_started(run, task)
        else:
            await hooks.turn_resumed(run)
        try:
            if parked is not None:
                outcome = await loop.resume(run, Thread(), parked, hooks)
            elif run.profile.mode == "plan" and planner is not None:
                outcome = await planner.run(run, Thread(), task, hooks)
            else:
                outcome = await loop.run(run, Thread(), task, hooks)
        except TurnParked as waiting:
            raise await self._parked(run, task, waiting.state) from None
        except asyncio.CancelledError:  # the parent was stopped (or timed this call out): never `running` forever
            self.parts.finish_later(run, hooks, TurnOutcome("", error=replies.TURN_STOPPED, stopped_by="interrupted"))
            raise
        except Exception as exc:  # the parent reads that its sub-agent failed, and goes on
            log.exception("sub-agent turn %s (%s) failed", run.turn_id, run.agent)
            failed = TurnOutcome("", error=f"{type(exc).__name__}: {exc}", stopped_by="error")
            await hooks.turn_finished(run, failed)
            return failed
        await hooks.turn_finished(run, outcome)
        return outcome

    async def _parked(self, run: RunContext, task: str, state: ParkedTurn) -> ApprovalPending:
        """The child waits for a human: its parent's call waits with it, and its state goes with the parent's."""
        try:  # the observers let go of it; it is parked whatever they say
            await self.hooks.turn_parked(run, state.approvals)
        except Exception:
            log.warning("a turn hook failed on parked sub-agent turn %s", run.turn_id, exc_info=True)
        assert run.delegation is not None and run.delegation.parent_call is not None
        child = {"turn_id": run.turn_id, "agent": run.agent, "task": task, "state": state.to_dict()}
        return ApprovalPending(state.approvals[0], run.delegation.parent_call, more=state.approvals[1:], child=child)
