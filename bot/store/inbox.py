"""SqlInbox: the durable inbox on SQLAlchemy (table `inbox`, migration 0004_inbox).

- `claim`: the exactly-once claim and the stored event are ONE `INSERT ... ON CONFLICT DO NOTHING RETURNING`
  (grouped with the claims arriving meanwhile), committed before the platform gets its ack; the row is
  leased to this instance from the start.
- Leases: every `lease_seconds / 3` one UPDATE renews the leases of every open row this instance holds.
- `take_over`: rows still open whose lease expired are leased to this instance in one statement; on
  PostgreSQL the candidates are picked `FOR UPDATE SKIP LOCKED`, so two instances never take the same row.
- `finish` goes through the write-behind queue after the turn's own rows; the lease is dropped with it. On
  PostgreSQL the other instances then hear of it (NOTIFY, bot/store/wakeups.py): one of theirs may wait for
  this row to close before it starts the next turn of the same thread (`earlier_elsewhere`).
- `park`: a turn waiting for an approval leaves its state on the row (`parked`), which keeps no lease, so
  nothing takes it over; a decision makes it `claimed` again in its own transaction (bot/approvals/store.py),
  and `take_parked` (or a take-over) leases it to exactly one instance, which resumes the turn."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from types import SimpleNamespace
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, exists, select, update

from bot.engine.messages import Trigger, TurnOutcome
from bot.records.inbox import (
    HELD_STATES,
    OPEN_STATES,
    InboxItem,
    InboxState,
    LiveKind,
    NewEvent,
    conversation_digest,
)
from bot.store.claims import BatchedInsert, Key
from bot.store.models import ApprovalRow, InboxRow, MessageRow, TurnRow, utcnow
from bot.store.outage import back_within, transient
from bot.store.owner import instance_id
from bot.store.repositories import SqlStore
from bot.store.wakeups import PgWakeups

log = logging.getLogger(__name__)
INBOX, M, T = cast(Table, InboxRow.__table__), cast(Table, MessageRow.__table__), cast(Table, TurnRow.__table__)
A = cast(Table, ApprovalRow.__table__)

_START = update(INBOX).where(INBOX.c.id == bindparam("b_id"))
_FINISH = update(INBOX).where(INBOX.c.id == bindparam("b_id"))
# The rows the writer is updating at this moment are skipped, not waited for (renewed at the next beat, a third
# of a lease later): the writer's batch and this UPDATE lock many of the same rows, in orders of their own, and a
# burst of a thousand events had PostgreSQL end one of them as a deadlock (bench/scale_out.py).
_RENEW = (update(INBOX).where(INBOX.c.id.in_(
              select(INBOX.c.id).where(INBOX.c.lease_owner == bindparam("b_owner"), INBOX.c.state.in_(OPEN_STATES))
              .with_for_update(skip_locked=True)))
          .values(lease_until=bindparam("b_until")))


def _item(row: Any) -> InboxItem:
    return InboxItem(id=row.id, platform=row.platform, event_key=row.event_key, channel=row.channel,
                     thread=row.thread, text=row.text, trigger=cast(Trigger, row.trigger), user=row.user,
                     reply=dict(row.reply or {}),
                     state=row.state, attempts=row.attempts, agent=row.agent, turn_id=row.turn_id,
                     effects=tuple(row.effects or ()), live=_live(row), parked=row.parked or None)


def _live(row: Any) -> dict[LiveKind, str]:
    live: dict[LiveKind, str] = {}
    if row.status_ref:
        live["status"] = row.status_ref
    if row.answer_ref:
        live["answer"] = row.answer_ref
    return live


class SqlInbox:
    def __init__(self, store: SqlStore, *, lease_seconds: float = 30.0, owner: str | None = None) -> None:
        self.store = store
        self.owner = owner or instance_id()  # the app passes the store's: one id per process (leases, turns)
        self.lease = timedelta(seconds=lease_seconds)
        self._claims: BatchedInsert[Key, InboxItem] = BatchedInsert(self._insert_new)
        self._effects: dict[int, list[str]] = {}
        self._turns: dict[int, str] = {}  # inbox id -> the turn now running it
        self._heartbeat: asyncio.Task[None] | None = None
        self._wake: Callable[[str], None] = lambda _: None
        self._wakeups: PgWakeups | None = None  # PostgreSQL: opened at the first use

    @property
    def dialect(self) -> str:
        return self.store.engine.dialect.name

    # --- claim ------------------------------------------------------------------------------------------
    async def claim(self, event: NewEvent) -> InboxItem | None:
        return await self._claims.claim((event.platform, event.event_key), event)

    async def _insert_new(self, events: Sequence[tuple[Key, Any]]) -> dict[Key, InboxItem]:
        now = utcnow()
        rows = [_new_row(cast(NewEvent, e), self.owner, now + self.lease, now) for _, e in events]
        # the new rows' ids only: the rest of each item is what was just written (no row to decode per event)
        inserted = await self.store.insert_new(INBOX, rows, ("id", "platform", "event_key"))
        ids = {(platform, event_key): new_id for new_id, platform, event_key in inserted}
        out: dict[Key, InboxItem] = {}
        for (key, _), row in zip(events, rows, strict=True):
            new_id = ids.pop((row["platform"], row["event_key"]), None)  # two keys cut to one: the first is new
            if new_id is not None:
                out[key] = _item(SimpleNamespace(**row, id=new_id, parked=None))
        return out

    # --- a turn's life -------------------------------------------------------------------------------------
    async def waited_out(self, error: BaseException) -> bool:
        if not transient(error):
            return False
        limit = self.store.writes.outage_seconds
        log.warning("a turn met a database outage before it started (%s); it starts when the database is back "
                    "(waited for up to %.0f s)", type(error).__name__, limit)
        if await back_within(self.store.engine, limit):
            return True
        log.error("the database stayed away for %.0f s: the turn is given up", limit)
        return False

    async def start(self, item: InboxItem, turn_id: str, agent: str) -> None:
        """Queued ahead of the turn's own rows; `effect` commits at once, so recovery sees it even if this
        did not get out. A resumed parked turn is not a new attempt."""
        self._turns[item.id] = turn_id
        resumed = item.parked is not None and item.turn_id == turn_id and item.state != "running"  # not cut
        self.store.writes.put(_START, {"b_id": item.id, "state": "running", "turn_id": turn_id, "agent": agent,
                                       "attempts": item.attempts + (0 if resumed else 1), "status_ref": None,
                                       "answer_ref": None, "updated_at": utcnow()}, turn_id)

    # --- a turn parked on an approval --------------------------------------------------------------------
    async def park(self, item: InboxItem, state: dict[str, Any], approvals: Sequence[int]) -> bool:
        """One transaction that starts with the write on this row: a decision's transaction starts with a write
        on it too (bot/approvals/store.py), so either it sees `parked` (and wakes it) or this sees the decision."""
        await self.store.writes.flush()  # the turn's rows so far are committed before it lets go
        self._effects.pop(item.id, None)  # what ran before is in the state: not done again on resume
        now = utcnow()
        async with self.store.engine.begin() as conn:
            await conn.execute(update(INBOX).where(INBOX.c.id == item.id).values(
                state="parked", parked=state, parked_at=now, lease_owner=None, lease_until=None, effects=None,
                status_ref=None, answer_ref=None, updated_at=now))
            decided = await conn.execute(select(A.c.id).where(A.c.id.in_(list(approvals)),
                                                              A.c.status != "pending").limit(1))
            if decided.first() is None:
                self._turns.pop(item.id, None)
                return True
            await conn.execute(update(INBOX).where(INBOX.c.id == item.id).values(
                state="running", lease_owner=self.owner, lease_until=now + self.lease))
            return False

    async def take_parked(self, turn_id: str) -> InboxItem | None:
        now = utcnow()
        stmt = (update(INBOX).where(INBOX.c.turn_id == turn_id, INBOX.c.state == "claimed",
                                    INBOX.c.parked_at.is_not(None), INBOX.c.lease_owner.is_(None))
                .values(lease_owner=self.owner, lease_until=now + self.lease, updated_at=now).returning(*INBOX.c))
        rows = await self.store.rows(stmt, {}, write=True)
        return _item(rows[0]) if rows else None

    async def waiting_in(self, session_id: str, item: InboxItem) -> str | None:
        stmt = (select(A.c.tool).join(INBOX, INBOX.c.turn_id == A.c.turn_id)
                .where(A.c.session_id == session_id, INBOX.c.parked_at.is_not(None),
                       INBOX.c.state.in_(HELD_STATES), INBOX.c.id != item.id)
                .order_by(A.c.id.desc()).limit(1))
        rows = await self.store.rows(stmt, {})
        return str(rows[0].tool) if rows else None

    async def trim_turn(self, turn_id: str, keep: int) -> None:
        last = (select(M.c.id).where(M.c.turn_id == turn_id).order_by(M.c.id).limit(1).offset(max(keep - 1, 0))
                .scalar_subquery())
        where = [M.c.turn_id == turn_id] + ([M.c.id > last] if keep > 0 else [])
        await self.store.execute(delete(M).where(*where), {})

    async def effect(self, item: InboxItem, tool: str) -> None:
        effects = self._effects.setdefault(item.id, list(item.effects))
        if tool in effects:
            return
        effects.append(tool)
        await self.store.execute(_START, {"b_id": item.id, "effects": list(effects), "state": "running",
                                           "turn_id": self._turns.get(item.id, item.turn_id), "updated_at": utcnow()})

    async def live_message(self, item: InboxItem, kind: LiveKind, ref: str) -> None:
        """Queued with the turn's rows (no round trip): lost only if the process dies within milliseconds of
        the post, and then the message stays as it would have without this."""
        turn_id = self._turns.get(item.id, item.turn_id)
        self.store.writes.put(_START, {"b_id": item.id, f"{kind}_ref": ref[:255], "updated_at": utcnow()}, turn_id)

    async def finish(self, item: InboxItem, state: InboxState, note: str | None = None) -> None:
        self._effects.pop(item.id, None)
        turn_id = self._turns.pop(item.id, item.turn_id)
        self.store.writes.put(_FINISH, {"b_id": item.id, "state": state, "note": note, "lease_owner": None,
                                        "lease_until": None, "updated_at": utcnow()}, turn_id)
        await self.store.writes.flush()
        wakeups = self._shared()
        if wakeups is not None:
            await wakeups.notify(conversation_digest(item.platform, item.channel, item.thread))

    # --- the order of a conversation's turns ------------------------------------------------------------
    def on_closed(self, wake: Callable[[str], None]) -> None:
        self._wake = wake

    def _shared(self) -> PgWakeups | None:
        """The LISTEN/NOTIFY connection where other instances may share the database (None: a SQLite file)."""
        if self.dialect == "sqlite":
            return None
        if self._wakeups is None:
            self._wakeups = PgWakeups.for_engine(self.store.direct, lambda key: self._wake(key))
        return self._wakeups

    async def earlier_elsewhere(self, item: InboxItem) -> bool:
        wakeups = self._shared()
        if wakeups is None:  # `yokebot run` holds the file alone: every open row is in this process's hands
            return False
        await wakeups.listen()  # first: a row closed after the look below wakes the caller
        stmt = (select(INBOX.c.id).where(INBOX.c.platform == item.platform, INBOX.c.channel == item.channel,
                                         INBOX.c.thread == item.thread, INBOX.c.state.in_(OPEN_STATES),
                                         INBOX.c.id < item.id, INBOX.c.lease_owner.is_distinct_from(self.owner))
                .limit(1))
        return bool(await self.store.rows(stmt, {}))

    async def close(self) -> None:
        await self.stop_heartbeat()
        if self._wakeups is not None:
            wakeups, self._wakeups = self._wakeups, None
            await wakeups.close()

    # --- leases ------------------------------------------------------------------------------------------
    async def renew(self) -> None:
        await self.store.execute(_RENEW, {"b_owner": self.owner, "b_until": utcnow() + self.lease})

    def start_heartbeat(self) -> None:
        if self._heartbeat is None:
            self._heartbeat = asyncio.get_running_loop().create_task(self._beat(), name="yokebot-inbox-leases")

    async def stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
            self._heartbeat = None

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.lease.total_seconds() / 3)
            try:
                await self.renew()
            except Exception as exc:  # the database is away: the leases run on; renewed when it returns
                log.warning("could not renew this instance's inbox leases (%s)", type(exc).__name__)

    async def take_over(self, limit: int = 50, *, every_open: bool = False,
                        platforms: Sequence[str] = (), owners: Sequence[str] = ()) -> list[InboxItem]:
        """Lease open rows whose lease expired (or, with every_open, every open row: for a process that knows
        it is alone on the database, a SQLite file it has locked; or, with `owners`, every open row those
        processes hold: they are known to be gone, bot/store/instances.py) to this instance."""
        now = utcnow()
        pick = select(INBOX.c.id).where(INBOX.c.state.in_(OPEN_STATES))
        # never its own rows: one it just claimed, or whose lease a late heartbeat let lapse, is in hand
        pick = pick.where(INBOX.c.lease_owner.is_distinct_from(self.owner))
        if platforms:
            pick = pick.where(INBOX.c.platform.in_(list(platforms)))
        if owners:
            pick = pick.where(INBOX.c.lease_owner.in_(list(owners)))
        elif not every_open:
            pick = pick.where((INBOX.c.lease_until < now) | INBOX.c.lease_until.is_(None))
        pick = pick.order_by(INBOX.c.id).limit(limit).with_for_update(skip_locked=True)
        stmt = (update(INBOX).where(INBOX.c.id.in_(pick.scalar_subquery()))
                .values(lease_owner=self.owner, lease_until=now + self.lease, updated_at=now).returning(*INBOX.c))
        rows = await self.store.rows(stmt, {}, write=True)
        return sorted((_item(r) for r in rows), key=lambda i: i.id)

    # --- interrupted turns -------------------------------------------------------------------------------
    async def answer_of(self, turn_id: str) -> str | None:
        found = await self.store.rows(select(T.c.answer).where(T.c.id == turn_id, T.c.status != "running"), {})
        return found[0].answer if found and found[0].answer else None

    async def interrupt_turn(self, turn_id: str, note: str, *, forget_history: bool) -> None:
        """The turn's row ends stopped by `interrupted` (never `running` forever; status `error`, as the engine
        records a turn cancelled at shutdown: one notion); with forget_history its partial
        messages leave the session history (a rerun answers the same message; llm_calls and
        tool_invocations keep what the interrupted attempt did)."""
        now = utcnow()
        await self.store.execute(update(T).where(T.c.id == turn_id, T.c.status == "running")
                                  .values(interrupted_row(note, now)), {})
        if forget_history:
            await self.store.execute(delete(M).where(M.c.turn_id == turn_id), {})

    async def interrupt_running_turns(self, note: str) -> int:
        """Every turn still `running` ends stopped by `interrupted`: for a process alone on its (SQLite) database at
        start-up, where nothing can still be running (`yokebot ask` and schedules included)."""
        parked = exists().where(INBOX.c.turn_id == T.c.id, INBOX.c.parked_at.is_not(None),
                                INBOX.c.state.in_(HELD_STATES))  # parked (or resuming): resumed, not ended
        rows = await self.store.rows(update(T).where(T.c.status == "running", ~parked)
                                      .values(interrupted_row(note, utcnow()))
                                      .returning(T.c.id), {}, write=True)
        return len(rows)


def interrupted_row(note: str, now: Any) -> dict[str, Any]:
    """The turn row of a turn a restart (or its process's death, bot/store/instances.py) cut short: what the
    engine writes for one it saw cancelled."""
    outcome = TurnOutcome("", error=note, stopped_by="interrupted")
    return {"status": outcome.status, "error": note, "stopped_by": outcome.stopped_by, "finished_at": now}


def _new_row(event: NewEvent, owner: str, until: Any, now: Any) -> dict[str, Any]:
    return {"platform": event.platform, "event_key": event.event_key[:255], "channel": event.channel,
            "thread": event.thread, "user": event.user, "text": event.text.replace("\x00", "\ufffd"),
            "trigger": event.trigger, "agent": None, "reply": event.reply, "state": "claimed",
            "lease_owner": owner, "lease_until": until, "attempts": 0, "turn_id": None, "effects": None,
            "note": None, "status_ref": None, "answer_ref": None, "created_at": now, "updated_at": now}
