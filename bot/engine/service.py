"""AgentService: the one door for every trigger (terminal, mention, DM, schedule)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass

from bot.engine.errors import SessionNotFound
from bot.engine.executor import RunContext
from bot.engine.loop import LoopEvent, Observe, ReActLoop
from bot.engine.messages import Message, TurnResult, Usage
from bot.engine.plan import PlanExecutor
from bot.engine.ports import MemoryStore, Notifier, SessionRecord, SessionStore
from bot.engine.profiles import AgentProfile
from bot.engine.tooling import Scope

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TurnRequest:
    platform: str
    channel: str
    thread: str
    text: str
    agent: str
    trigger: str = "message"  # console | mention | dm | thread | schedule
    user: str | None = None
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class TurnInfo:
    """The turn running in this task: log lines and metrics read it (trace id = turn id)."""

    session_id: str
    turn_id: str
    agent: str
    platform: str
    channel: str
    trigger: str


# A ContextVar, not a global: each asyncio task sees its own turn, and tasks a turn spawns inherit it.
CURRENT_TURN: ContextVar[TurnInfo | None] = ContextVar("yokebot_current_turn", default=None)


class turn_scope:  # lower case: used like a function, `async with turn_scope(info):`
    """Sets CURRENT_TURN for the body of the turn, and restores what was there after."""

    def __init__(self, info: TurnInfo) -> None:
        self.info = info
        self.token: Token[TurnInfo | None] | None = None

    async def __aenter__(self) -> TurnInfo:
        self.token = CURRENT_TURN.set(self.info)
        return self.info

    async def __aexit__(self, *_: object) -> None:
        if self.token is not None:
            CURRENT_TURN.reset(self.token)


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


async def _ignore(_: LoopEvent) -> None:
    return None


class AgentService:
    def __init__(
        self,
        store: SessionStore,
        loop: ReActLoop,
        profiles: Callable[[str], AgentProfile],
        *,
        notifier: Notifier | None = None,
        memory: MemoryStore | None = None,
        planner: PlanExecutor | None = None,
    ) -> None:
        self.store, self.loop, self.profiles = store, loop, profiles
        self.notifier, self.memory = notifier, memory
        self.planner = planner  # runs the turns of `mode: plan` profiles
        self.locks = KeyedLocks()
        self._background: set[asyncio.Task[None]] = set()

    def _finish_in_background(self, turn_id: str, error: str) -> None:
        async def finish() -> None:
            try:
                await self.store.finish_turn(turn_id, answer="", iterations=0, hit_limit=False, usage=Usage(),
                                             error=error)
            except Exception:
                log.warning("could not record the end of turn %s", turn_id, exc_info=True)

        task = asyncio.get_running_loop().create_task(finish())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def open_session(self, req: TurnRequest) -> SessionRecord:
        if req.session_id:
            session = await self.store.get_session(req.session_id)
            if session is None:
                raise SessionNotFound(f"There is no session {req.session_id!r}; `yokebot sessions` lists them.")
            return session
        return await self.store.session_for(req.platform, req.channel, req.thread, req.agent)

    async def handle(self, req: TurnRequest, observe: Observe = _ignore) -> TurnResult:
        session = await self.open_session(req)
        profile = self.profiles(session.agent)
        turn_id = uuid.uuid4().hex
        info = TurnInfo(session.id, turn_id, session.agent, session.platform, session.channel, req.trigger)
        async with self.locks.hold(session.id) as earlier, turn_scope(info):
            await self.store.start_turn(session.id, turn_id, req.trigger, req.user, req.text)
            # a session this call created, that no other turn has used meanwhile, has no history to read
            fresh = session.created and earlier == 0
            history = [] if fresh else await self.store.history(session.id, profile.max_history_turns)
            scope = Scope(session.platform, session.channel, session.thread, req.user)
            run = RunContext(session.id, turn_id, profile, scope, self.notifier, self.memory)

            async def emit(message: Message) -> None:
                await self.store.append(session.id, turn_id, message)

            runner = self.planner.run if profile.mode == "plan" and self.planner is not None else self.loop.run
            try:
                out = await runner(run, history, req.text, emit, observe)
            except asyncio.CancelledError:  # shutdown: the turn's row says so rather than `running` forever
                self._finish_in_background(turn_id, "yokebot stopped during this turn")
                raise
            except Exception as exc:
                log.exception("turn %s in session %s failed", turn_id, session.id)
                await self.store.finish_turn(turn_id, answer="", iterations=0, hit_limit=False,
                                             usage=Usage(),
                                             error=f"{type(exc).__name__}: {exc}")
                raise
            await self.store.finish_turn(turn_id, answer=out.answer, iterations=out.iterations,
                                         hit_limit=out.hit_iteration_limit, usage=out.usage, error=out.error)
        return TurnResult(
            answer=out.answer, session_id=session.id, turn_id=turn_id, iterations=out.iterations,
            hit_iteration_limit=out.hit_iteration_limit, tool_calls=tuple(out.tool_results), usage=out.usage,
            error=out.error,
        )
