"""AgentService: the one door for every trigger (terminal, mention, DM, schedule)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from contextvars import ContextVar, Token
from dataclasses import dataclass

from bot.engine import replies
from bot.engine.children import ChildTurns
from bot.engine.context.attachments import AttachmentLimits, AttachmentSource, Prepared, for_turn
from bot.engine.errors import SessionNotFound, YokebotError
from bot.engine.guard import Block, Verdict, check, input_blocked, screen
from bot.engine.messages import USER_STOP, Scope, Thread, Trigger, TurnOutcome, TurnResult, conversation_key
from bot.engine.model.pacing import STARTS
from bot.engine.ports import (
    MemoryItem,
    MemoryStore,
    Notifier,
    NotifyLedger,
    SessionLock,
    SessionRecord,
    SessionStore,
)
from bot.engine.run.context import ApprovalGate, RunContext
from bot.engine.run.guarding import TurnGuard
from bot.engine.run.hooks import CompositeHooks, TurnHooks
from bot.engine.run.loop import ReActLoop
from bot.engine.run.parked import ParkedTurn, Parking, TurnParked
from bot.engine.run.plan import PlanExecutor
from bot.engine.run.spend import SpendCaps, SpendReached
from bot.engine.spec.profiles import AgentProfile

log = logging.getLogger(__name__)

RESET_WORDS = frozenset({"reset", "/reset", "!reset"})
RESET_ANSWER = ("Done: I have forgotten this thread's conversation (long-term memories stay). "
                "What should we start with?")


def _settle(task: asyncio.Task[list[MemoryItem]]) -> None:
    """A memory read the turn did not wait for (it ended first, or its session is another agent's): stopped,
    or its failure taken, so that it is not logged as never retrieved (the turn said what went wrong)."""
    if not task.done():
        task.cancel()
    elif not task.cancelled():
        task.exception()


def is_reset(text: str) -> bool:
    """`reset` or `/reset` alone (any case; a leading @-mention already stripped by the adapter)."""
    return text.strip().lower().rstrip(".!") in RESET_WORDS


@dataclass(frozen=True, slots=True)
class TurnRequest:
    platform: str
    channel: str
    thread: str
    text: str
    agent: str
    trigger: Trigger = "message"
    user: str | None = None
    session_id: str | None = None
    turn_id: str | None = None  # chosen by the caller when it must know it first (the inbox records it)
    attachments: tuple[AttachmentSource, ...] = ()  # files attached to the message (bot/engine/context/attachments.py)
    parking: Parking | None = None  # where the turn's state goes if it waits for an approval (else it waits here)
    parked: ParkedTurn | None = None  # resume this parked turn (`turn_id` is its id) instead of starting one
    # an answer that is not the model's (a chat command's: `status`, `help`…, docs/commands.md): the turn is
    # recorded like any other, and this gives its answer from the turn's context instead of a model call
    answer: Callable[[RunContext], Awaitable[str]] | None = None


# A ContextVar, not a global: each asyncio task sees its own turn, and tasks a turn spawns inherit it.
# Log lines read it (session id, trace id = turn id); nothing else should.
CURRENT_TURN: ContextVar[RunContext | None] = ContextVar("yokebot_current_turn", default=None)


class turn_scope:  # lower case: used like a function, `async with turn_scope(run):`
    """Sets CURRENT_TURN for the body of the turn, and restores what was there after."""

    def __init__(self, run: RunContext) -> None:
        self.run = run
        self.token: Token[RunContext | None] | None = None

    async def __aenter__(self) -> RunContext:
        self.token = CURRENT_TURN.set(self.run)
        return self.run

    async def __aexit__(self, *_: object) -> None:
        if self.token is not None:
            CURRENT_TURN.reset(self.token)


@asynccontextmanager
async def _spending(run: RunContext) -> AsyncGenerator[None, None]:
    """The turn's spend caps: a slot it took near a cap is let go once the turn (and its record) is done."""
    try:
        yield
    finally:
        if run.spend is not None:
            await run.spend.close()


@dataclass
class _Entry:
    lock: asyncio.Lock
    users: int = 0  # holding or waiting
    turns: int = 0  # how many held it since the entry was made


class KeyedLocks:
    """One asyncio.Lock per key, dropped when nobody holds or waits for it (no growth per session)."""

    def __init__(self) -> None:
        self._locks: dict[str, _Entry] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncGenerator[int, None]:
        """Hold the key's lock; yields how many others held it before us while we were registered."""
        entry = self._locks.setdefault(key, _Entry(asyncio.Lock()))
        entry.users += 1
        try:
            async with entry.lock:
                entry.turns += 1
                yield entry.turns - 1
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._locks[key]

    def __len__(self) -> int:
        return len(self._locks)


class AgentService:
    """Runs turns. `hooks` are the app's standing hooks (the recorder, the metrics); `handle` adds a
    call's own (a live view, a progress indicator) after them."""

    def __init__(
        self,
        store: SessionStore,
        loop: ReActLoop,
        profiles: Callable[[str], AgentProfile],
        *,
        hooks: TurnHooks | None = None,
        notifier: Notifier | None = None,
        memory: MemoryStore | None = None,
        session_lock: SessionLock | None = None,
        planner: PlanExecutor | None = None,
        approvals: ApprovalGate | None = None,
        notify_ledger: NotifyLedger | None = None,
        attachment_limits: AttachmentLimits | None = None,
        spend: SpendCaps | None = None,
    ) -> None:
        self.store, self.loop, self.profiles = store, loop, profiles
        self.attachment_limits = attachment_limits or AttachmentLimits()
        self.notify_ledger = notify_ledger
        self.spend = spend  # the spend caps (bot/engine/run/spend.py), checked before every model call
        self.approvals = approvals
        self.hooks = CompositeHooks(*([hooks] if hooks is not None else []))
        self.notifier, self.memory = notifier, memory
        self.planner = planner  # runs the turns of `mode: plan` profiles
        self.locks = KeyedLocks()
        self.session_lock = session_lock  # across processes; None: this process is the only one
        self._background: set[asyncio.Task[None]] = set()
        # sub-agents' turns (`delegate:` in AGENT.md; bot/engine/children.py)
        self.children = ChildTurns(store, loop, profiles, self.hooks, turn_scope, self._finish_in_background,
                                   notifier, memory, notify_ledger, planner)

    def _finish_in_background(self, run: RunContext, hooks: TurnHooks, outcome: TurnOutcome) -> None:
        async def finish() -> None:
            try:
                await hooks.turn_finished(run, outcome)
            except Exception:
                log.warning("could not record the end of turn %s", run.turn_id, exc_info=True)

        task = asyncio.get_running_loop().create_task(finish())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def settled(self) -> None:
        """Return once the stopped turns' ends (recorded in the background) are written."""
        if self._background:
            await asyncio.wait(list(self._background))

    async def open_session(self, req: TurnRequest) -> SessionRecord:
        if req.session_id:
            session = await self.store.get_session(req.session_id)
            if session is None:
                raise SessionNotFound(f"There is no session {req.session_id!r}; `yokebot sessions` lists them.")
            return session
        return await self.store.session_for(req.platform, req.channel, req.thread, req.agent)

    def _across(self, key: str) -> AbstractAsyncContextManager[None]:
        return self.session_lock.hold(key) if self.session_lock is not None else nullcontext()

    async def handle(self, req: TurnRequest, hooks: TurnHooks | None = None) -> TurnResult:
        # Both locks (this process's, and across processes) are the thread's and are taken before its session
        # is opened: a session this call creates has then been seen by nobody else, so it has no history to
        # read (the common case, a fresh mention, makes no read at all).
        known = await self.open_session(req) if req.session_id else None
        where = known or req
        key = conversation_key(where.platform, where.channel, where.thread)
        async with self.locks.hold(key), self._across(key):
            # the memory read needs the thread's locks (it must see what the thread's last turn remembered),
            # not its session: it runs while the session is opened
            agent = known.agent if known is not None else req.agent
            memories = self._read_memory(agent, where.channel, req.text) if req.answer is None else None
            try:
                return await self._locked(req, hooks, known, agent, memories)
            finally:
                if memories is not None:
                    _settle(memories)

    def shown_input(self, agent: str, text: str) -> str:
        """`text` as the agent's `input` guardrails leave it (a secret redacted, a blocked match replaced by its
        mark): what a platform may show of a message it repeats where others read it (a command's `ask`, whose
        question was seen by its author alone). Nothing is recorded: the turn records its own decisions."""
        try:
            profile = self.profiles(agent)
        except YokebotError:
            return self.loop.executor.secrets(text)
        return check("input", profile.guardrails.input, text, self.loop.executor.secrets).text

    def _read_memory(self, agent: str, channel: str, text: str) -> asyncio.Task[list[MemoryItem]] | None:
        """The memories most relevant to the message, read from now on (an alert's text carries its labels)."""
        try:
            profile = self.profiles(agent)
        except YokebotError:
            return None  # the turn says what is wrong with the agent once its session is open
        return self.loop.prompts.read_memory(profile, channel, text)

    async def _locked(self, req: TurnRequest, hooks: TurnHooks | None, known: SessionRecord | None, agent: str,
                      memories: asyncio.Task[list[MemoryItem]] | None) -> TurnResult:
        session = known or await self.open_session(req)
        # a burst's new sessions are opened by one INSERT, so all its turns wake at once here: their steps up
        # to the first model call are spread over loop iterations (pacing.py)
        await STARTS.pace()
        profile = self.profiles(session.agent)
        files = (await for_turn(req.text, req.attachments, profile, self.loop.default_model,
                                self.loop.executor.redact, self.attachment_limits) if req.attachments else None)
        profile = files.profile if files is not None else profile
        scope = Scope(session.platform, session.channel, session.thread, req.user)
        run = RunContext(session.id, req.turn_id or uuid.uuid4().hex, profile, scope, req.trigger,
                         self.notifier, self.memory, self.approvals, files.prepared.files if files else None,
                         self.notify_ledger, parks=req.parking is not None and profile.mode != "plan",
                         memories=memories if session.agent == agent else None,  # else: its own read, later
                         spend=self.spend.turn(profile, scope, self.notifier) if self.spend is not None else None,
                         delegation=self.children.root(profile, hooks, req.parked))
        turn_hooks = self.hooks.plus(hooks)
        async with turn_scope(run), _spending(run):
            # under the thread's locks, in order; a thread made just now has no parked turn to ask about
            if req.parking is not None and req.parked is None and not session.created:
                tool = await req.parking.waiting(session.id)
                if tool is not None:
                    return await self._behind(req, run, turn_hooks, tool)
            return await self._turn(req, session, run, turn_hooks, files.prepared if files else None)

    async def _behind(self, req: TurnRequest, run: RunContext, turn_hooks: TurnHooks, tool: str) -> TurnResult:
        """A message in a thread whose earlier turn waits for an approval: told so, it does not run ahead."""
        outcome = TurnOutcome(replies.waiting_for_approval(tool))
        await turn_hooks.turn_started(run, req.text)
        await turn_hooks.turn_finished(run, outcome)
        return TurnResult(run.session_id, run.turn_id, outcome)

    @staticmethod
    async def _answered(answer: Callable[[RunContext], Awaitable[str]], session: SessionRecord, run: RunContext,
                        turn_hooks: TurnHooks) -> TurnResult:
        try:
            outcome = TurnOutcome(await answer(run))
        except Exception as exc:
            log.exception("the answer of turn %s failed", run.turn_id)
            await turn_hooks.turn_finished(run, TurnOutcome("", error=f"{type(exc).__name__}: {exc}",
                                                            stopped_by="error"))
            raise
        await turn_hooks.turn_finished(run, outcome)
        return TurnResult(session.id, run.turn_id, outcome)

    async def _run(self, req: TurnRequest, run: RunContext, history: Thread, turn_hooks: TurnHooks,
                   files: Prepared | None) -> TurnOutcome | None:
        """The turn's loop; None when it parked on an approval (its state is with `req.parking`)."""
        state = req.parked
        while True:
            try:
                if state is not None:
                    return await self.loop.resume(run, history, state, turn_hooks,
                                                  files.message.images if files else ())
                if run.profile.mode == "plan" and self.planner is not None:  # plan-and-execute, on the same thread
                    return await self.planner.run(run, history, files.message if files else req.text, turn_hooks)
                return await self.loop.run(run, history, files.message if files else req.text, turn_hooks)
            except SpendReached as reached:  # a cap reached outside the loop's own calls (plan mode)
                return TurnOutcome(reached.stop.detail, stopped_by=reached.stop.reason)
            except TurnParked as parked:
                if req.parking is None:
                    raise
                if await req.parking.park(parked.state):
                    log.info("turn %s parked on approval(s) %s", run.turn_id, list(parked.state.approvals))
                    try:  # the observers (trace, metrics) let go of it; it is parked whatever they say
                        await turn_hooks.turn_parked(run, parked.state.approvals)
                    except Exception:
                        log.warning("a turn hook failed on parked turn %s", run.turn_id, exc_info=True)
                    return None
                state = parked.state  # decided while it parked: go on here at once

    @staticmethod
    async def _input(req: TurnRequest, asked: Verdict, files: Prepared | None,
                     guard: TurnGuard) -> tuple[TurnRequest, Prepared | None, Block | None]:
        """The `input` stage: the message (checked already: `asked`) and its attached files' text, as the model
        may read them."""
        said = req.text
        req = dataclasses.replace(req, text=asked.text) if asked.changed else req
        if files is None:
            return req, None, asked.block
        body = files.message.content  # the message, then a block per file
        own = body.startswith(said)
        rest = await guard.told(await screen("input", guard.rails.input, body[len(said):] if own else body,
                                             guard.secrets))
        if asked.changed or rest.changed:
            message = dataclasses.replace(files.message, content=(asked.text if own else "") + rest.text)
            files = dataclasses.replace(files, message=message)
        return req, files, asked.block or rest.block

    async def _turn(self, req: TurnRequest, session: SessionRecord, run: RunContext,
                    turn_hooks: TurnHooks, files: Prepared | None = None) -> TurnResult:
        profile = run.profile
        # what the turn reads is read before it is started (no row of it stored, no model called): a database
        # outage until here lets the pipeline start it again once the database is back
        history: Thread | None = None
        waited = False
        if req.parked is not None or not (is_reset(req.text) or req.answer is not None):
            history = Thread() if session.created else \
                await self.store.load_thread(session.id, profile.max_history_turns)
            waited = not session.created
        memories = run.memories
        if memories is not None and req.parked is None and not (isinstance(memories, asyncio.Future)
                                                                and memories.done()):
            await memories  # a task: the prompt awaits it again for its result
            waited = True
        if waited:  # a burst's reads end together: its turns are spread over loop iterations again
            await STARTS.pace()
        if req.parked is None:  # a resumed turn has its row, and its messages so far, already
            guard = TurnGuard(run, turn_hooks, self.loop.executor.secrets)
            asked = check("input", profile.guardrails.input, req.text, guard.secrets)  # before anything stores it
            await turn_hooks.turn_started(run, asked.text)
            await guard.told(asked)
            if files is not None:
                await turn_hooks.attachments_read(run, files.records)
            req, files, block = await self._input(req, asked, files, guard)
            if block is not None:  # the model never sees it; the user hears which rule, never the match
                outcome = TurnOutcome(input_blocked(block), stopped_by="guardrail")
                await turn_hooks.turn_finished(run, outcome)
                return TurnResult(session.id, run.turn_id, outcome)
        else:
            await turn_hooks.turn_resumed(run)
        if req.parked is None and is_reset(req.text):  # no model call: every platform gets it, even with the model down
            await self.store.reset_thread(session.id, run.turn_id)
            outcome = TurnOutcome(RESET_ANSWER)
            await turn_hooks.turn_finished(run, outcome)
            return TurnResult(session.id, run.turn_id, outcome)
        if req.parked is None and req.answer is not None:  # a command's answer: no model call either
            return await self._answered(req.answer, session, run, turn_hooks)
        assert history is not None  # read above unless the message was a reset or a command's
        if req.parked is not None:
            history = Thread(history.summary, [t for t in history.turns if t.turn_id != run.turn_id])
        try:
            outcome = await self._run(req, run, history, turn_hooks, files)
            if outcome is None:
                return TurnResult(session.id, run.turn_id, TurnOutcome(""), parked=True)
        except asyncio.CancelledError as exc:  # its user or a shutdown: the row says which, never `running` forever
            if USER_STOP in exc.args:
                stopped = TurnOutcome("", error=USER_STOP, stopped_by="user")
            else:
                stopped = TurnOutcome("", error=replies.TURN_STOPPED, stopped_by="interrupted")
            self._finish_in_background(run, turn_hooks, stopped)
            raise
        except Exception as exc:
            log.exception("turn %s in session %s failed", run.turn_id, session.id)
            failed = TurnOutcome("", error=f"{type(exc).__name__}: {exc}", stopped_by="error")
            await turn_hooks.turn_finished(run, failed)
            raise
        if files is not None and files.problems:  # the user hears what could not be read, whatever the model said
            outcome = dataclasses.replace(outcome, answer=f"{outcome.answer}\n\n_{files.answer_note()}_".strip())
        await turn_hooks.turn_finished(run, outcome)
        return TurnResult(session.id, run.turn_id, outcome)
