"""Read the audit tables: sessions with their activity, one session's turns as traces, usage totals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import column, func, or_, select, table
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.engine.errors import SessionNotFound, YokebotError
from bot.observability.timeparse import as_utc
from bot.store.models import (
    AttachmentRow,
    GuardrailEventRow,
    LLMCallRow,
    SessionRow,
    SummaryRow,
    ToolInvocationRow,
    TurnRow,
)

S, T = SessionRow.__table__, TurnRow.__table__
L, TI, SUM = LLMCallRow.__table__, ToolInvocationRow.__table__, SummaryRow.__table__
AT = AttachmentRow.__table__
# the runbooks an alert investigation's turn was given (bot/alerts/tables.py, which this package does not import)
RB = table("turn_runbooks", column("turn_id"), column("position"), column("kind"), column("ref"), column("title"),
           column("why"), column("given"))
GE = GuardrailEventRow.__table__


# --- sessions --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SessionOverview:
    id: str
    platform: str
    channel: str
    thread: str
    agent: str
    turns: int
    created_at: datetime
    last_activity: datetime
    prompt_tokens: int
    completion_tokens: int

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def _summary_query() -> Any:
    turns = select(T.c.session_id, func.count().label("n")).group_by(T.c.session_id).subquery()
    tokens = (select(L.c.session_id, func.sum(L.c.prompt_tokens).label("p"),
                     func.sum(L.c.completion_tokens).label("c"))
              .group_by(L.c.session_id).subquery())
    return (
        select(S, func.coalesce(turns.c.n, 0).label("turns"), func.coalesce(tokens.c.p, 0).label("p"),
               func.coalesce(tokens.c.c, 0).label("c"))
        .outerjoin(turns, turns.c.session_id == S.c.id)
        .outerjoin(tokens, tokens.c.session_id == S.c.id)
    )


def _summary(row: Any) -> SessionOverview:
    return SessionOverview(row.id, row.platform, row.channel, row.thread, row.agent, int(row.turns),
                          as_utc(row.created_at), as_utc(row.updated_at), int(row.p), int(row.c))


async def list_sessions(
    engine: AsyncEngine, *, platform: str | None = None, channel: str | None = None, agent: str | None = None,
    since: datetime | None = None, limit: int = 20,
) -> list[SessionOverview]:
    """Most recently active first. `channel` matches the channel id or name as stored."""
    query = _summary_query()
    if platform:
        query = query.where(S.c.platform == platform)
    if channel:
        query = query.where(S.c.channel == channel)
    if agent:
        query = query.where(S.c.agent == agent)
    if since:
        query = query.where(S.c.updated_at >= since)
    query = query.order_by(S.c.updated_at.desc(), S.c.id).limit(limit)
    async with engine.connect() as conn:
        return [_summary(r) for r in (await conn.execute(query)).all()]


async def find_session(engine: AsyncEngine, ref: str) -> SessionOverview:
    """By id, or by a unique prefix of it (what fits in a terminal column is enough)."""
    ref = ref.strip()
    query = _summary_query().where(or_(S.c.id == ref, S.c.id.startswith(ref, autoescape=True))).limit(3)
    async with engine.connect() as conn:
        found = [_summary(r) for r in (await conn.execute(query)).all()]
    exact = [s for s in found if s.id == ref]
    if exact:
        return exact[0]
    if not found or not ref:
        raise SessionNotFound(f"There is no session {ref!r}; `yokebot sessions` lists them.")
    if len(found) > 1:
        raise YokebotError(f"{ref!r} matches more than one session; give more of the id.")
    return found[0]


# --- traces --------------------------------------------------------------------------------------------
@dataclass
class ToolStep:
    call_id: str
    tool: str
    arguments: Any
    status: str
    attempts: int
    duration_ms: float
    result: str
    reason: str | None
    finished_at: datetime | None = None  # the row's `created_at`: it is written when the call ends
    child: TurnTrace | None = None  # a `delegate` call: the sub-agent's turn it ran (docs/delegation.md)

    @property
    def started_at(self) -> datetime | None:
        return self.finished_at - timedelta(milliseconds=self.duration_ms) if self.finished_at else None


@dataclass
class ModelStep:
    model: str
    attempt: int
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    finish_reason: str | None
    error: str | None
    content: str
    tools: list[ToolStep] = field(default_factory=lambda: list[ToolStep]())
    purpose: str = "turn"  # turn | final (the last call without tools) | compaction (a summary)


@dataclass
class MemoryStep:
    """A summary the turn made of older turns, or a reset of the thread's memory."""

    kind: str  # summary | reset
    folded_turns: int
    content: str


@dataclass
class TurnTrace:
    number: int
    id: str
    trigger: str
    user: str | None
    text: str
    answer: str | None
    status: str
    error: str | None
    iterations: int
    hit_limit: bool
    started_at: datetime
    finished_at: datetime | None
    stopped_by: str | None = None  # answer | iteration_limit | loop | error | interrupted | budget:<which>
    steps: list[ModelStep] = field(default_factory=lambda: list[ModelStep]())
    unmatched_tools: list[ToolStep] = field(default_factory=lambda: list[ToolStep]())
    memory: list[MemoryStep] = field(default_factory=lambda: list[MemoryStep]())
    plan: dict[str, Any] | None = None  # mode: plan: steps (text, status, finding, iterations) and replans
    # files attached to the message: name, mimetype, size, sha256, origin, given, detail (`attachments`)
    attachments: list[dict[str, Any]] = field(default_factory=lambda: list[dict[str, Any]]())
    # the runbooks and runbook pages an alert investigation started with: kind, ref, title, why, given
    runbooks: list[dict[str, Any]] = field(default_factory=lambda: list[dict[str, Any]]())
    agent: str | None = None  # a sub-agent's turn: which agent ran it (a session's own turns: the session's)
    # guardrail decisions: stage, rule, type, kind, action, excerpt (`guardrail_events`, docs/guardrails.md)
    guardrails: list[dict[str, Any]] = field(default_factory=lambda: list[dict[str, Any]]())

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens for s in self.steps)

    @property
    def completion_tokens(self) -> int:
        return sum(s.completion_tokens for s in self.steps)


@dataclass
class SessionTrace:
    session: SessionOverview
    turns: list[TurnTrace]


def _tool_step(r: Any) -> ToolStep:
    return ToolStep(r.call_id, r.tool, r.arguments, r.status, r.attempts, float(r.duration_ms),
                    r.result or "", r.reason, as_utc(r.created_at) if r.created_at else None)


def _model_step(r: Any) -> tuple[ModelStep, list[str]]:
    response: dict[str, Any] = r.response or {}
    message: dict[str, Any] = response.get("message") or {}
    calls: list[dict[str, Any]] = message.get("tool_calls") or []
    call_ids = [str(c.get("id", "")) for c in calls]
    step = ModelStep(r.model, r.attempt, r.prompt_tokens, r.completion_tokens, float(r.latency_ms),
                     r.finish_reason, r.error, message.get("content") or "", purpose=r.purpose)
    return step, call_ids


def _assemble(turn: TurnTrace, llm_rows: list[Any], tool_rows: list[Any]) -> None:
    """Hang each tool call under the model call whose reply asked for it (matched on the call id)."""
    tools = {r.call_id: _tool_step(r) for r in tool_rows}
    for row in llm_rows:
        step, call_ids = _model_step(row)
        step.tools = [tools.pop(cid) for cid in call_ids if cid in tools]
        turn.steps.append(step)
    turn.unmatched_tools = list(tools.values())


def _pick(turns: list[Any], number: int | None) -> list[tuple[int, Any]]:
    numbered = list(enumerate(turns, start=1))
    if number is None:
        return numbered
    index = number - 1 if number > 0 else len(numbered) + number
    if not 0 <= index < len(numbered) or number == 0:
        raise YokebotError(f"The session has {len(numbered)} turn(s); --turn takes 1..{len(numbered)} "
                           "(or -1 for the last).")
    return [numbered[index]]


async def reset_session(engine: AsyncEngine, session_ref: str) -> SessionOverview:
    """`yokebot sessions reset`: the thread's later turns carry nothing from before (the audit trail stays)."""
    from bot.store.repositories import SqlStore

    session = await find_session(engine, session_ref)
    store = SqlStore(engine)
    try:
        await store.reset_thread(session.id)
    finally:
        await store.close()
    return session


async def trace(engine: AsyncEngine, session_ref: str, turn: int | None = None) -> SessionTrace:
    session = await find_session(engine, session_ref)
    async with engine.connect() as conn:
        turn_rows = (await conn.execute(
            select(T).where(T.c.session_id == session.id).order_by(T.c.started_at, T.c.id))).all()
        picked = _pick(list(turn_rows), turn)
        ids = [r.id for _, r in picked]
        llm = (await conn.execute(select(L).where(L.c.session_id == session.id, L.c.turn_id.in_(ids))
                                  .order_by(L.c.id))).all()
        tools = (await conn.execute(select(TI).where(TI.c.session_id == session.id, TI.c.turn_id.in_(ids))
                                    .order_by(TI.c.id))).all()
        memory = (await conn.execute(select(SUM).where(SUM.c.session_id == session.id, SUM.c.turn_id.in_(ids))
                                     .order_by(SUM.c.id))).all()
        files = (await conn.execute(select(AT).where(AT.c.session_id == session.id, AT.c.turn_id.in_(ids))
                                    .order_by(AT.c.id))).all()
        given = (await conn.execute(select(RB).where(RB.c.turn_id.in_(ids)).order_by(RB.c.turn_id,
                                                                                       RB.c.position))).all()
        rails = (await conn.execute(select(GE).where(GE.c.session_id == session.id, GE.c.turn_id.in_(ids))
                                    .order_by(GE.c.id))).all()
        out: list[TurnTrace] = []
        for number, r in picked:
            t = _turn(number, r, llm, tools)
            t.memory = [MemoryStep(m.kind, m.folded_turns, m.content) for m in memory if m.turn_id == r.id]
            t.attachments = [{k: getattr(f, k) for k in ("name", "mimetype", "size", "sha256", "origin", "given",
                                                         "detail")} for f in files if f.turn_id == r.id]
            t.runbooks = [{"kind": g.kind, "ref": g.ref, "title": g.title, "why": g.why, "given": bool(g.given)}
                          for g in given if g.turn_id == r.id]
            t.guardrails = [{k: getattr(g, k) for k in ("stage", "rule", "type", "kind", "action", "excerpt")}
                            for g in rails if g.turn_id == r.id]
            out.append(t)
        await _sub_agents(conn, out)
    return SessionTrace(session, out)


def _turn(number: int, r: Any, llm: Sequence[Any], tools: Sequence[Any]) -> TurnTrace:
    finished = as_utc(r.finished_at) if r.finished_at else None
    t = TurnTrace(number, r.id, r.trigger, r.user, r.text, r.answer, r.status, r.error, r.iterations,
                  bool(r.hit_limit), as_utc(r.started_at), finished, r.stopped_by, plan=r.plan)
    _assemble(t, [x for x in llm if x.turn_id == r.id], [x for x in tools if x.turn_id == r.id])
    return t


MAX_TREE_DEPTH = 4  # max_delegation_depth is at most 3


async def _sub_agents(conn: Any, turns: list[TurnTrace]) -> None:
    """Hang each sub-agent's turn under the `delegate` call of its parent that ran it, level by level."""
    level = turns
    for _ in range(MAX_TREE_DEPTH):
        by_id = {t.id: t for t in level}
        if not by_id:
            return
        found = (await conn.execute(select(T, S.c.agent).join(S, S.c.id == T.c.session_id)
                                    .where(T.c.parent_turn_id.in_(list(by_id))).order_by(T.c.started_at))).all()
        if not found:
            return
        ids, sessions = [r.id for r in found], list({r.session_id for r in found})
        llm = (await conn.execute(select(L).where(L.c.session_id.in_(sessions), L.c.turn_id.in_(ids))
                                  .order_by(L.c.id))).all()
        tools = (await conn.execute(select(TI).where(TI.c.session_id.in_(sessions), TI.c.turn_id.in_(ids))
                                    .order_by(TI.c.id))).all()
        level: list[TurnTrace] = []
        for r in found:
            child = _turn(1, r, llm, tools)
            child.agent = r.agent
            parent = by_id[r.parent_turn_id]
            step = next((s for m in parent.steps for s in m.tools if s.call_id == r.parent_call_id), None)
            step = step or next((s for s in parent.unmatched_tools if s.call_id == r.parent_call_id), None)
            if step is None:  # its parent's call has no row yet (still running, or cut): shown at the end
                step = ToolStep(r.parent_call_id or "", "delegate", {}, "running", 0, 0.0, "", None)
                parent.unmatched_tools.append(step)
            step.child = child
            level.append(child)
