"""The approval flow, written once for every platform: the engine's `ApprovalGate` (post the request, wait for
a decision in the database) and what a click does (who may decide, exactly one decision, the turn is told).

    gated call ─> row `pending` ─> platform posts Approve / Deny ─> a chat turn on the inbox parks (raises
    ApprovalPending: its state goes to its inbox row, its task ends); any other turn waits: event from a local
    click, or the row polled (a click on another instance) ─> approved: the tool runs │ denied │ expired
    click ─> may this user decide? (else a private answer) ─> conditional UPDATE (one decision counts), in the
          same transaction the parked turn's inbox row is made claimable ─> message updated ─> this instance
          resumes the parked turn (`resume`), or the waiting turn wakes; nobody holds the turn any more (it
          is truly gone): the thread and the clicker are told, and the call is recorded as not run
    expiry ─> a timer per parked request (re-armed by `watch`, which recovery runs every sweep) expires it,
          tells the thread and resumes the turn, which tells the model

Platforms render (`ApprovalButtons`); terminals decide inline (`InlineApprover`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from bot.approvals.records import Approval, ApprovalRecords, NewApproval
from bot.engine.errors import ApprovalPending
from bot.engine.run import ApprovalDecision, ApprovalRequest, RunContext
from bot.engine.spec import ApproverKind, Requester, may_approve

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(UTC)

ACTION_APPROVE, ACTION_DENY = "yokebot_approve", "yokebot_deny"  # button ids; the value is the row id


class ApprovalButtons(Protocol):
    """One platform's messages: the request with Approve / Deny, the decision shown on it, a sentence in the
    thread. `channel`/`thread` are the platform's IDs (the turn's scope, or a schedule's post_to)."""

    async def ask(self, approval: Approval) -> str:
        """Post the request; returns a reference to its message (kept on the row)."""
        ...

    async def show(self, approval: Approval) -> None:
        """Update the request's message with the decision (no buttons any more)."""
        ...

    async def say(self, approval: Approval, text: str) -> None:
        """Post a sentence in the request's thread."""
        ...

    def kind(self, approver: str) -> ApproverKind:
        """What an approver entry can name on this platform (Slack: `U…`/`W…` a user, `S…` a user group;
        Discord: a snowflake, user or role): a user matches only user entries, a group only group entries."""
        ...


class InlineApprover(Protocol):
    """A terminal: asks its user right there (`yokebot chat`), or decides by a flag (`yokebot ask`)."""

    async def decide(self, approval: Approval) -> tuple[Literal["approved", "denied"], str] | str:
        """(verdict, who) or one sentence saying why nobody can be asked."""
        ...


@dataclass(frozen=True, slots=True)
class ApprovalTiming:
    poll_seconds: float = 1.0  # how often a waiting turn reads its row (a click on another instance)
    heartbeat_seconds: float = 5.0  # how often it says it is still waiting
    stale_seconds: float = 30.0  # a heartbeat older than this: the turn is gone
    ref_wait_seconds: float = 1.5  # a click on a request whose message ref is not stored yet waits this long


@dataclass(frozen=True, slots=True)
class ClickAnswer:
    """What the platform answers the click with: the updated request (Slack chat.update, Discord type 7) or
    one private sentence (ephemeral) for the clicker."""

    approval: Approval | None = None
    private: str | None = None


NOT_YOURS = "You may not approve this request; it needs one of its approvers."
NOT_THIS_MESSAGE = "These buttons do not belong to that approval request, so nothing was decided."
STARTED_BEFORE = ("it was approved and had started once already when yokebot was restarted, so it is not run "
                  "a second time")


def gone_text(approval: Approval) -> str:
    return (f"{approval.status.capitalize()}, but the conversation that asked for `{approval.tool}` is no "
            "longer running (I was restarted), so it was not run. Ask me again if it is still needed.")


TASK_CHARS = 200


def on_behalf(approval: Approval) -> str:
    """" for the `logs` sub-agent, working on: …" when a sub-agent asked (docs/delegation.md), else "". The task
    is the parent model's text: one line, cut, no backticks (platforms escape and defuse it like the arguments)."""
    if approval.task is None:
        return ""
    task = " ".join(approval.task.split()).replace("`", "'")
    task = task if len(task) <= TASK_CHARS else task[: TASK_CHARS - 1] + "…"
    return f" for the `{approval.agent}` sub-agent, working on: {task}"


def describe(approval: Approval) -> str:
    """The exact call, as plain text (platforms wrap it)."""
    return f"{approval.tool} {approval.arguments}"


def status_line(approval: Approval) -> str:
    when = approval.decided_at.strftime("%Y-%m-%d %H:%M UTC") if approval.decided_at else ""
    if approval.status == "expired":
        return f"Expired at {when}: nobody decided in time. Not run."
    verb = "Approved" if approval.status == "approved" else "Denied"
    return f"{verb} by {{by}} at {when}."


def timeout_words(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


class ApprovalDesk:
    """The `ApprovalGate` of the app. Platforms register their buttons; adapters hand clicks to `click`."""

    def __init__(self, store: ApprovalRecords, timing: ApprovalTiming = ApprovalTiming(),
                 resume: Callable[[str], Awaitable[bool]] | None = None) -> None:
        """`resume`: resume the parked turn with this id here (the app: `InboxTurns.resume_parked`); None:
        recovery takes it over."""
        self.store, self.timing = store, timing
        self.buttons: dict[str, ApprovalButtons] = {}
        self.inline: dict[str, InlineApprover] = {}
        self._waiting: dict[int, asyncio.Event] = {}
        self.resume = resume
        self._timers: dict[int, asyncio.TimerHandle] = {}  # expiry of the parked requests seen here
        self._tasks: set[asyncio.Task[None]] = set()

    def register(self, platform: str, buttons: ApprovalButtons) -> None:
        self.buttons[platform] = buttons

    def register_inline(self, platform: str, approver: InlineApprover) -> None:
        self.inline[platform] = approver

    # --- the gate -----------------------------------------------------------------------------------------
    async def decide(self, run: RunContext, request: ApprovalRequest) -> ApprovalDecision:
        where = self._where(run)
        if isinstance(where, str):
            return ApprovalDecision("refused", note=f"{request.tool} needs a human's approval, but {where}")
        platform, channel, thread = where
        if run.parks and (asked := await self.store.for_call(run.turn_id, request.call_id)) is not None:
            return await self._asked_before(asked)
        now = utcnow()
        agent, task = request.via if request.via is not None else (run.agent, None)  # a sub-agent's call
        new = NewApproval(run.session_id, run.turn_id, agent, request.call_id, request.tool, request.arguments,
                          run.scope.user, request.spec.approvers, request.spec.self_approve, platform, channel,
                          thread, now + timedelta(seconds=request.spec.timeout_seconds), task)
        if run.parks and (left := await self.store.adopt(new, now)) is not None:
            log.info("approval %s: asked before a restart cut its turn; turn %s waits for it", left.id, run.turn_id)
            return await self._asked_before(left)  # the request in the thread: never a second one
        approval_id = await self.store.create(new, now)
        if run.parks:  # nobody waits in-process: a click finds the turn by its inbox row, not a heartbeat
            await self.store.heartbeat(approval_id, None)
        approval = await self._get(approval_id)
        inline = self.inline.get(platform)
        if inline is not None:
            return await self._once(await self._inline(inline, approval))
        try:
            ref = await self.buttons[platform].ask(approval)
        except Exception:
            log.exception("could not post approval request %s", approval_id)
            await self.store.expire(approval_id)
            await self.store.set_outcome(approval_id, "not_run")
            return ApprovalDecision("refused", note=f"{request.tool} needs a human's approval, but the request "
                                    "could not be posted", approval_id=approval_id)
        await self.store.set_message(approval_id, ref)
        if run.parks:
            self._arm(await self._get(approval_id))
            raise ApprovalPending(approval_id, request.call_id)
        return await self._once(await self._wait(approval_id))

    async def _asked_before(self, approval: Approval) -> ApprovalDecision:
        """A resumed turn at a call it parked on: the decision made meanwhile; never a second request."""
        if approval.status == "pending" and approval.expired(utcnow()):
            await self._expire(approval)
            approval = await self._get(approval.id)
        if approval.status == "pending":  # another call of the group was decided: this one still waits
            self._arm(approval)
            raise ApprovalPending(approval.id, approval.call_id)
        return await self._once(self._decision(approval))

    async def _once(self, decision: ApprovalDecision) -> ApprovalDecision:
        """An approved call runs at most once, whichever instance resumes its turn, and however often."""
        if decision.approved and decision.approval_id is not None \
                and not await self.store.claim_run(decision.approval_id):
            return ApprovalDecision("refused", decision.by, decision.at, STARTED_BEFORE, decision.approval_id)
        return decision

    # --- parked requests: expiry -------------------------------------------------------------------------
    def _arm(self, approval: Approval) -> None:
        if approval.id in self._timers:
            return
        delay = max(0.0, (approval.expires_at - utcnow()).total_seconds())
        loop = asyncio.get_running_loop()
        self._timers[approval.id] = loop.call_later(delay, lambda: self._spawn(self._expire_parked(approval.id)))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _expire_parked(self, approval_id: int) -> None:
        self._timers.pop(approval_id, None)
        try:
            approval = await self.store.get(approval_id)
            if approval is not None and approval.status == "pending":
                await self._expire(approval)
        except Exception:
            log.warning("could not expire approval request %s (recovery tries again)", approval_id, exc_info=True)

    async def watch(self) -> int:
        """Expire the parked requests whose time is up (a restart lost their timers) and arm the others; run
        by recovery at start-up and every sweep. The number expired."""
        expired = 0
        for approval in await self.store.parked_pending():
            if approval.expired(utcnow()):
                await self._expire(approval)
                expired += 1
            else:
                self._arm(approval)
        return expired

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    async def _wake(self, turn_id: str) -> None:
        if self.resume is None:
            return
        try:
            await self.resume(turn_id)
        except Exception:  # the row is claimable: recovery takes it over at its next sweep
            log.exception("could not resume parked turn %s here", turn_id)

    async def ran(self, decision: ApprovalDecision, status: str) -> None:
        if decision.approval_id is not None:
            await self.store.set_outcome(decision.approval_id, "ran" if status == "ok" else status)

    def _where(self, run: RunContext) -> tuple[str, str, str | None] | str:
        """Where the request is posted: the turn's own thread, or a scheduled run's post_to channel."""
        scope = run.scope
        if scope.platform in self.inline or scope.platform in self.buttons:
            return scope.platform, scope.channel, scope.thread
        if scope.platform == "schedule":
            # a profile schedule's runs happen in channel `agent/name` (bot/scheduling/model.py)
            spec = next((s for s in run.profile.schedules if f"{run.agent}/{s.name}" == scope.channel), None)
            if spec is None or spec.post_to is None:
                return "this scheduled run has no post_to channel to ask in"
            platform, _, channel = spec.post_to.partition(":")
            if platform in self.buttons:
                return platform, channel, None
            return f"{platform} is not connected in this process, so nobody can be asked"
        return f"nobody can be asked from {scope.platform}"

    async def _inline(self, inline: InlineApprover, approval: Approval) -> ApprovalDecision:
        answer = await inline.decide(approval)
        if isinstance(answer, str):
            await self.store.expire(approval.id)
            await self.store.set_outcome(approval.id, "not_run")
            return ApprovalDecision("refused", note=answer, approval_id=approval.id)
        verdict, who = answer
        await self.store.decide(approval.id, verdict, who)
        return self._decision(await self._get(approval.id))

    async def _get(self, approval_id: int) -> Approval:
        approval = await self.store.get(approval_id)
        if approval is None:
            raise LookupError(f"approval {approval_id} vanished")
        return approval

    @staticmethod
    def _decision(a: Approval) -> ApprovalDecision:
        verdict = a.status if a.status != "pending" else "expired"
        return ApprovalDecision(verdict, a.decided_by, a.decided_at, approval_id=a.id)

    async def _wait(self, approval_id: int) -> ApprovalDecision:
        """Until the row is decided or expires. A local click sets the event; a click elsewhere is read from the
        row at the next poll. Cancelled (shutdown): the row says nobody waits any more."""
        event = self._waiting[approval_id] = asyncio.Event()
        beat = utcnow()
        try:
            while True:
                approval = await self._get(approval_id)
                now = utcnow()
                if approval.status != "pending":
                    return self._decision(approval)
                if approval.expired(now):
                    await self._expire(approval)
                    continue
                if (now - beat).total_seconds() >= self.timing.heartbeat_seconds:
                    await self.store.heartbeat(approval_id, now)
                    beat = now
                left = (approval.expires_at - now).total_seconds()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), timeout=max(0.01, min(self.timing.poll_seconds, left)))
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.store.heartbeat(approval_id, None))
            raise
        finally:
            self._waiting.pop(approval_id, None)

    async def _expire(self, approval: Approval) -> None:
        move = await self.store.expire(approval.id)
        if not move:
            return  # decided at the last moment
        timer = self._timers.pop(approval.id, None)
        if timer is not None:
            timer.cancel()
        expired = await self._get(approval.id)
        await self._tell(expired, f"Nobody approved `{approval.tool}` within "
                                  f"{timeout_words(approval.timeout_seconds)}, so the request expired and it "
                                  "was not run.")
        if move == "woke":
            await self._wake(approval.turn_id)

    async def _tell(self, approval: Approval, text: str) -> None:
        buttons = self.buttons.get(approval.platform)
        if buttons is None:
            return
        try:
            await buttons.show(approval)
            await buttons.say(approval, text)
        except Exception:
            log.warning("could not update approval request %s", approval.id, exc_info=True)

    # --- a click -----------------------------------------------------------------------------------------
    async def click(self, platform: str, approval_id: int, user: str, groups: frozenset[str],
                    approve: bool, message_ref: str) -> ClickAnswer:
        """A click on Approve / Deny by `user` (in `groups`: Slack user groups, Discord roles) on `platform`, on
        the message `message_ref` (the platform's form of the reference `ask` returned). The button's value is
        only a claim: the click counts only on the very message that asked for this request."""
        approval = await self.store.get(approval_id)
        if approval is None or approval.platform != platform:
            return ClickAnswer(private="This approval request is unknown here.")
        if approval.message_ref is None:  # a click can arrive before `ask` has returned the message's ref
            approval = await self._posted(approval)
        if approval.message_ref is None or approval.message_ref != message_ref:
            log.warning("approval %s: a click by %s on message %r, which did not ask for it (it is %r)",
                        approval_id, user, message_ref, approval.message_ref)
            return ClickAnswer(private=NOT_THIS_MESSAGE)
        if not self._may_decide(approval, user, groups):
            log.info("approval %s: %s may not decide it", approval_id, user)
            return ClickAnswer(private=NOT_YOURS)
        if approval.status != "pending":
            return ClickAnswer(private=f"This request was already {approval.status}.")
        now = utcnow()
        if approval.expired(now):
            await self._expire(approval)
            return ClickAnswer(private="This request has expired; it was not run.")
        move = await self.store.decide(approval_id, "approved" if approve else "denied", user, now)
        if not move:
            latest = await self._get(approval_id)
            return ClickAnswer(private=f"This request was already {latest.status}.")
        decided = await self._get(approval_id)
        log.info("approval %s for %s %s by %s", approval_id, decided.tool, decided.status, user)
        timer = self._timers.pop(approval_id, None)
        if timer is not None:
            timer.cancel()
        event = self._waiting.get(approval_id)
        if event is not None:
            event.set()
        elif move == "woke":  # its turn was parked: resumed here, now
            self._spawn(self._wake(decided.turn_id))
        elif move == "decided" and self._gone(decided, now):  # no inbox row holds it, nobody waits in-process
            await self._orphaned(decided)
            return ClickAnswer(approval=decided, private=gone_text(decided))
        return ClickAnswer(approval=decided)

    async def waiting_for(self, platform: str, user: str, groups: frozenset[str]) -> list[Approval]:
        """The requests on `platform` still waiting for a decision that `user` (in `groups`) may make
        (`/yokebot approvals`, docs/commands.md)."""
        pending = await self.store.pending(datetime.now(UTC))
        return [a for a in pending if a.platform == platform and self._may_decide(a, user, groups)]

    def _may_decide(self, approval: Approval, user: str, groups: frozenset[str]) -> bool:
        """The row's typed approvers (a keyword is never a clicker's ID), the platform's rule for what an ID
        names (a user whose ID equals a group entry is not that group)."""
        buttons = self.buttons.get(approval.platform)
        if buttons is None:
            return False
        return may_approve(approval.approvers, approval.self_approve, approval.requested_by, user, groups,
                           buttons.kind)

    async def _posted(self, approval: Approval) -> Approval:
        """The row once the request's message ref is on it (at most `ref_wait_seconds`: Discord wants an answer
        within 3 s)."""
        deadline = asyncio.get_running_loop().time() + self.timing.ref_wait_seconds
        while approval.message_ref is None and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
            approval = await self._get(approval.id)
        return approval

    def _gone(self, approval: Approval, now: datetime) -> bool:
        """Nobody waits for it: the turn was stopped, or its process died (no heartbeat for a while)."""
        beat = approval.heartbeat_at
        return beat is None or (now - beat).total_seconds() > self.timing.stale_seconds

    async def _orphaned(self, approval: Approval) -> None:
        await self.store.set_outcome(approval.id, "not_run")
        buttons = self.buttons.get(approval.platform)
        if buttons is None:
            return
        try:
            await buttons.say(approval, gone_text(approval))
        except Exception:
            log.warning("could not tell the thread of approval %s that its turn is gone", approval.id, exc_info=True)


def approver_names(approval: Approval, mention: Callable[[str], str]) -> str:
    """`who may approve`, each ID rendered by the platform (`mention`), the keyword in words."""
    return ", ".join("the requester" if isinstance(a, Requester) else mention(a.id) for a in approval.approvers)

