"""AlertStore: the alert tables on SQLAlchemy Core, the same statements on SQLite and PostgreSQL.

Every write is one short transaction of its own (never through the chat write-behind queue: a webhook is
answered only once its body is committed)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import String, Table, func, select, update
from sqlalchemy import cast as cast_
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.alerts.tables import AlertGroupRow, AlertNotificationRow, IncidentRow, TurnRunbookRow
from bot.store.claims import BatchedInsert, Key
from bot.store.models import InboxRow, SessionRow, utcnow

N = cast(Table, AlertNotificationRow.__table__)
G = cast(Table, AlertGroupRow.__table__)
RB = cast(Table, TurnRunbookRow.__table__)
INC = cast(Table, IncidentRow.__table__)
S = cast(Table, SessionRow.__table__)
I = cast(Table, InboxRow.__table__)  # noqa: E741 - the alias of the inbox table, beside G, N, RB, INC and S


@dataclass(frozen=True, slots=True)
class Stored:
    """A webhook body taken to process."""

    id: int
    source: str
    body: str
    attempts: int


@dataclass(frozen=True, slots=True)
class Incident:
    """An alert group's thread as remembered (`incidents`; docs/knowledge.md)."""

    id: int
    group_id: int
    generation: int
    source: str
    agent: str
    alertname: str
    identity: str
    group_labels: Mapping[str, str]
    labels: Mapping[str, str]
    conclusion: str | None
    summarized: bool
    answer_chars: int
    started_at: datetime
    resolved_at: datetime | None
    thread_link: str | None
    session_id: str | None
    turn_id: str | None


def _incident(row: Any) -> Incident:
    return Incident(row.id, row.group_id, row.generation, row.source, row.agent, row.alertname, row.identity,
                    dict(row.group_labels or {}), dict(row.labels or {}), row.conclusion, bool(row.summarized),
                    int(row.answer_chars or 0), _aware(row.started_at), _aware(row.resolved_at), row.thread_link,
                    row.session_id, row.turn_id)


@dataclass(frozen=True, slots=True)
class Group:
    id: int
    source: str
    group_key: str
    agent: str
    post_to: str
    title: str
    state: str
    generation: int
    alerts: Mapping[str, str]  # fingerprint -> firing | resolved
    root_platform: str | None
    root_channel: str | None
    root_ref: str | None
    thread: str | None
    root_owner: str | None
    investigation: str
    cooldown_seconds: int
    fired_at: datetime
    resolved_at: datetime | None
    updated_at: datetime


def _aware(value: Any) -> Any:
    """SQLite hands datetimes back naive (they were stored in UTC)."""
    if isinstance(value, datetime) and value.tzinfo is None:
        from datetime import UTC

        return value.replace(tzinfo=UTC)
    return value


def _group(row: Any) -> Group:
    return Group(id=row.id, source=row.source, group_key=row.group_key, agent=row.agent, post_to=row.post_to,
                 title=row.title, state=row.state, generation=row.generation, alerts=dict(row.alerts or {}),
                 root_platform=row.root_platform, root_channel=row.root_channel, root_ref=row.root_ref,
                 thread=row.thread, root_owner=row.root_owner, investigation=row.investigation,
                 cooldown_seconds=row.cooldown_seconds, fired_at=_aware(row.fired_at),
                 resolved_at=_aware(row.resolved_at), updated_at=_aware(row.updated_at))


@dataclass(frozen=True, slots=True)
class Listed:
    """A group as `yokebot alerts list` shows it."""

    group: Group
    session_id: str | None  # the thread's session, once its investigation (or a reply) started a turn there
    turn_state: str | None  # the investigation's inbox row: claimed, running, parked, answered, failed, …

    @property
    def investigation(self) -> str:
        """none, not investigated (the storm limit), or where the investigation's turn is."""
        g = self.group
        if g.investigation == "skipped":
            return "not investigated"
        if g.investigation != "started":
            return "none"
        return {"claimed": "queued", "running": "running", "parked": "waiting for approval",
                "answered": "answered", "failed": "failed", "interrupted": "interrupted",
                "skipped": "skipped"}.get(self.turn_state or "", "starting")


def group_hash(source: str, key: str) -> str:
    return hashlib.sha256(f"{source}\x1f{key}".encode()).hexdigest()


class AlertStore:
    def __init__(self, engine: AsyncEngine, owner: str, lease_seconds: float = 30.0) -> None:
        self.engine, self.owner, self.lease = engine, owner, timedelta(seconds=lease_seconds)
        insert = sqlite_insert if engine.dialect.name == "sqlite" else pg_insert
        self._insert_group = insert(G).on_conflict_do_nothing().returning(*G.c)
        self._insert_given = insert(RB).on_conflict_do_nothing()
        self._insert_incident = insert(INC).on_conflict_do_nothing()
        self._single = (engine.execution_options(isolation_level="AUTOCOMMIT")
                        if engine.dialect.name == "postgresql" else None)
        self._accepts: BatchedInsert[Key, int] = BatchedInsert(self._insert_bodies)
        self._serial = 0

    async def _one(self, statement: Any, params: Any = None) -> list[Any]:
        """One statement in a transaction of its own; on PostgreSQL in autocommit (one round trip, where BEGIN,
        the statement and COMMIT were three; a single statement is atomic either way)."""
        if self._single is not None:
            async with self._single.connect() as conn:
                result = await conn.execute(statement, params if params is not None else {})
                return list(result.all()) if result.returns_rows else []
        async with self.engine.begin() as conn:
            result = await conn.execute(statement, params if params is not None else {})
            return list(result.all()) if result.returns_rows else []

    # --- webhook bodies ---------------------------------------------------------------------------------
    async def accept(self, source: str, body: str) -> int:
        """Store a body, leased to this instance: committed when this returns (then the sender gets its 2xx).
        Bodies arriving while a transaction runs go into the next one, one multi-row INSERT (a storm)."""
        self._serial += 1
        stored = await self._accepts.claim((source, str(self._serial)), body)
        assert stored is not None  # every key is new
        return stored

    async def _insert_bodies(self, bodies: Sequence[tuple[Key, Any]]) -> dict[Key, int]:
        now = utcnow()
        rows = [{"source": key[0], "body": str(body).replace("\x00", "\ufffd"), "state": "new", "note": None,
                 "lease_owner": self.owner, "lease_until": now + self.lease, "attempts": 0, "received_at": now}
                for key, body in bodies]
        ids = await self._one(N.insert().returning(N.c.id, sort_by_parameter_order=True), rows)
        return {key: int(row.id) for (key, _), row in zip(bodies, ids, strict=True)}

    async def done(self, notification: int, note: str | None = None) -> None:
        await self._one(update(N).where(N.c.id == notification).values(
            state="done", note=note, lease_owner=None, lease_until=None))

    async def release(self, notification: int, retry_in: float) -> None:
        """Processing failed (a platform or the database refused): let any instance, this one included, take
        the body over again after `retry_in` seconds."""
        await self._one(update(N).where(N.c.id == notification, N.c.state == "new").values(
            lease_owner=None, lease_until=utcnow() + timedelta(seconds=retry_in)))

    async def renew(self) -> None:
        await self._one(update(N).where(N.c.lease_owner == self.owner, N.c.state == "new")
                        .values(lease_until=utcnow() + self.lease))

    async def take_over(self, *, every_open: bool = False, limit: int = 100) -> list[Stored]:
        """Bodies still `new` whose instance died (lease expired; with every_open: all but this instance's)."""
        now = utcnow()
        pick = select(N.c.id).where(N.c.state == "new", N.c.lease_owner.is_distinct_from(self.owner))
        if not every_open:
            pick = pick.where((N.c.lease_until < now) | N.c.lease_until.is_(None))
        pick = pick.order_by(N.c.id).limit(limit).with_for_update(skip_locked=True)
        rows = await self._one(update(N).where(N.c.id.in_(pick.scalar_subquery()))
                               .values(lease_owner=self.owner, lease_until=now + self.lease,
                                       attempts=N.c.attempts + 1)
                               .returning(N.c.id, N.c.source, N.c.body, N.c.attempts))
        return sorted((Stored(r.id, r.source, r.body, r.attempts) for r in rows), key=lambda s: s.id)

    # --- groups -------------------------------------------------------------------------------------------
    async def group_for(self, source: str, key: str, agent: str, post_to: str, title: str,
                        cooldown_seconds: int) -> tuple[Group, bool]:
        """The group's row, made if new: (row, made by this call). The maker holds the claim to post its root."""
        now = utcnow()
        made = await self._one(self._insert_group, {
            "source": source, "group_hash": group_hash(source, key), "group_key": key, "agent": agent,
            "post_to": post_to, "title": title[:500], "state": "firing", "generation": 1, "alerts": {},
            "root_platform": None, "root_channel": None, "root_ref": None, "thread": None,
            "root_owner": self.owner, "root_until": now + self.lease, "investigation": "none",
            "investigated_at": None, "cooldown_seconds": cooldown_seconds, "fired_at": now, "resolved_at": None,
            "updated_at": now})
        if made:
            return _group(made[0]), True
        rows = await self._one(select(G).where(G.c.source == source, G.c.group_hash == group_hash(source, key)))
        return _group(rows[0]), False

    async def claim_root(self, group: Group) -> bool:
        """Take the claim to post the group's root (none posted yet, and no live claim by another instance)."""
        now = utcnow()
        rows = await self._one(update(G).where(
            G.c.id == group.id, G.c.generation == group.generation, G.c.root_ref.is_(None),
            (G.c.root_owner == self.owner) | G.c.root_owner.is_(None) | (G.c.root_until < now))
            .values(root_owner=self.owner, root_until=now + self.lease).returning(G.c.id))
        return bool(rows)

    async def new_generation(self, group: Group, agent: str, post_to: str, title: str,
                             cooldown_seconds: int) -> Group | None:
        """A resolved group firing again after its cool-down gets a new thread: the next generation, with the
        root claim for this instance; None when another instance moved it on first."""
        now = utcnow()
        rows = await self._one(update(G).where(G.c.id == group.id, G.c.generation == group.generation,
                                               G.c.state == "resolved")
                               .values(generation=group.generation + 1, state="firing", alerts={},
                                       agent=agent, post_to=post_to, title=title[:500], root_platform=None,
                                       root_channel=None, root_ref=None, thread=None, root_owner=self.owner,
                                       root_until=now + self.lease, investigation="none", investigated_at=None,
                                       cooldown_seconds=cooldown_seconds, fired_at=now, resolved_at=None,
                                       updated_at=now).returning(*G.c))
        return _group(rows[0]) if rows else None

    async def set(self, group: Group, **values: Any) -> None:
        await self._one(update(G).where(G.c.id == group.id, G.c.generation == group.generation)
                        .values(updated_at=utcnow(), **values))

    async def reserve_investigation(self, group: Group, per_10m: int) -> tuple[bool, int]:
        """Count the investigations started in the last 10 minutes (every instance), and reserve one for this
        group if that is under `per_10m`: (reserved, how many groups wanted one in that time, this included)."""
        now = utcnow()
        window = now - timedelta(minutes=10)
        async with self.engine.begin() as conn:
            started = (await conn.execute(select(func.count()).select_from(G).where(
                G.c.investigated_at >= window, G.c.investigation == "started"))).scalar_one()
            wanted = (await conn.execute(select(func.count()).select_from(G).where(
                G.c.investigated_at >= window))).scalar_one()
            ok = started < per_10m
            await conn.execute(update(G).where(G.c.id == group.id, G.c.generation == group.generation)
                               .values(investigation="started" if ok else "skipped", investigated_at=now,
                                       updated_at=now))
        return ok, int(wanted) + 1

    async def recent(self, limit: int = 20) -> list[Listed]:
        """The most recently changed groups, each with its thread's session (what `yokebot trace` takes) and its
        investigation's inbox state, for `yokebot alerts list`."""
        key = cast_(G.c.id, String) + ":" + cast_(G.c.generation, String)  # the investigation's event key
        query = (select(G, S.c.id.label("session_id"), I.c.state.label("turn_state"))
                 .outerjoin(S, (S.c.platform == G.c.root_platform) & (S.c.channel == G.c.root_channel)
                            & (S.c.thread == G.c.thread))
                 .outerjoin(I, (I.c.platform == "alerts") & (I.c.event_key == key))
                 .order_by(G.c.updated_at.desc(), G.c.id.desc()).limit(limit))
        return [Listed(_group(r), r.session_id, r.turn_state) for r in await self._one(query)]

    # --- what an investigation's turn was given ---------------------------------------------------------------
    async def record_given(self, turn_id: str, session_id: str, given: Sequence[Mapping[str, Any]]) -> None:
        """The runbooks and pages a turn started with (bot/alerts/knowledge.py `Given`), once per turn."""
        if not given:
            return
        now = utcnow()
        await self._one(self._insert_given, [
            {"turn_id": turn_id, "position": i, "session_id": session_id, "kind": str(g["kind"])[:16],
             "ref": str(g["ref"]), "title": str(g["title"]), "why": str(g["why"]), "given": bool(g["given"]),
             "created_at": now} for i, g in enumerate(given)])

    # --- incidents ------------------------------------------------------------------------------------------------
    async def open_incident(self, group: Group, *, alertname: str, identity: str, group_labels: Mapping[str, str],
                            labels: Mapping[str, str], started_at: datetime, thread_link: str | None) -> None:
        """The group's thread as an incident: one row per (group, generation), whoever asks first, once."""
        now = utcnow()
        await self._one(self._insert_incident, {
            "group_id": group.id, "generation": group.generation, "source": group.source, "agent": group.agent,
            "alertname": alertname[:255], "identity": identity, "group_labels": dict(group_labels),
            "labels": dict(labels), "conclusion": None, "summarized": False, "answer_chars": 0,
            "started_at": started_at, "resolved_at": None, "thread_link": thread_link, "session_id": None,
            "turn_id": None, "updated_at": now})

    async def conclude(self, group_id: int, generation: int, conclusion: str, *, summarized: bool,
                       answer_chars: int, session_id: str, turn_id: str) -> None:
        """The investigation answered (or its answer was summarized): the conclusion, its session and turn."""
        await self._one(update(INC).where(INC.c.group_id == group_id, INC.c.generation == generation).values(
            conclusion=conclusion, summarized=summarized, answer_chars=answer_chars, session_id=session_id,
            turn_id=turn_id, updated_at=utcnow()))

    async def incident_resolved(self, group: Group, at: datetime | None) -> None:
        """Resolved at `at`; None: firing again (within the cool-down, in the same thread)."""
        await self._one(update(INC).where(INC.c.group_id == group.id, INC.c.generation == group.generation)
                        .values(resolved_at=at, updated_at=utcnow()))

    async def incidents(self, *, identity: str | None = None, other_than: str | None = None,
                        alertname: str | None = None, since: datetime | None = None,
                        concluded: bool = False, limit: int = 100) -> list[Incident]:
        """Incidents, newest first: of one alert (`identity`), of every other alert (`other_than`), by name."""
        query = select(INC)
        if identity is not None:
            query = query.where(INC.c.identity == identity)
        if other_than is not None:
            query = query.where(INC.c.identity != other_than)
        if alertname is not None:
            query = query.where(INC.c.alertname == alertname)
        if since is not None:
            query = query.where(INC.c.started_at >= since)
        if concluded:
            query = query.where(INC.c.conclusion.is_not(None))
        rows = await self._one(query.order_by(INC.c.started_at.desc(), INC.c.id.desc()).limit(limit))
        return [_incident(r) for r in rows]
