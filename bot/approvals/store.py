"""The `approvals` table: one row per gated tool call. A decision is a conditional UPDATE (`WHERE status =
'pending'`), so exactly one of two concurrent clicks counts, on any instance sharing the database. The same
transaction makes the inbox row of a turn parked on the request claimable again (`state` parked -> claimed,
no lease): exactly one instance then resumes the turn (bot/store/inbox.py, `take_parked`)."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime
from typing import Any, Literal, cast

from sqlalchemy import Table, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.approvals.records import Approval, NewApproval
from bot.engine.spec import ApprovalStatus, Move, dump_approvers, load_approvers
from bot.records.inbox import HELD_STATES, OPEN_STATES
from bot.store.models import ApprovalRow, InboxRow, utcnow

__all__ = ["Approval", "ApprovalStatus", "ApprovalStore", "NewApproval"]

A = cast(Table, ApprovalRow.__table__)
INBOX = cast(Table, InboxRow.__table__)


def _utc(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; every time here is UTC."""
    if value is None:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _same_call(old: Approval, new: NewApproval) -> bool:
    return (old.requested_by, old.approvers, old.self_approve, old.platform, old.channel, old.thread) == (
        new.requested_by, tuple(new.approvers), new.self_approve, new.platform, new.channel, new.thread)


def _approval(r: Any) -> Approval:
    created, expires = _utc(r.created_at), _utc(r.expires_at)
    assert created is not None and expires is not None
    return Approval(r.id, r.session_id, r.turn_id, r.call_id, r.tool, r.arguments, r.requested_by,
                    load_approvers(r.approvers or ()), bool(r.self_approve), r.platform, r.channel, r.thread,
                    r.message_ref, r.status, r.decided_by, _utc(r.decided_at), r.outcome, created, expires,
                    _utc(r.heartbeat_at), r.agent, r.task)


class ApprovalStore:
    """`ApprovalRecords` (bot/engine/spec/approval.py) on the `approvals` table."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def create(self, new: NewApproval, now: datetime | None = None) -> int:
        now = now or utcnow()
        values = {f.name: getattr(new, f.name) for f in fields(NewApproval)}
        values.update(approvers=dump_approvers(new.approvers), status="pending", created_at=now, heartbeat_at=now)
        async with self.engine.begin() as conn:
            result = await conn.execute(insert(A).values(**values).returning(A.c.id))
            return int(result.scalar_one())

    async def get(self, approval_id: int) -> Approval | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(A).where(A.c.id == approval_id))).first()
        return _approval(row) if row is not None else None

    async def for_call(self, turn_id: str, call_id: str) -> Approval | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(A).where(A.c.turn_id == turn_id, A.c.call_id == call_id)
                                      .order_by(A.c.id.desc()).limit(1))).first()
        return _approval(row) if row is not None else None

    async def adopt(self, new: NewApproval, now: datetime | None = None) -> Approval | None:
        """A pending request for the same call that an earlier turn of this session posted and never parked on:
        that turn was cut (a kill -9) between posting it and storing its state, and `new`'s turn is its message
        run again. "The same call": tool, arguments, requester, approvers, self-approval and place all equal,
        so whoever may decide it is who may decide `new`. Its row now belongs to `new`'s turn and call (a
        conditional UPDATE: one winner), so the request already in the thread is the one that counts and none
        is posted twice. A leftover whose message was never recorded (cut while posting) cannot be told apart
        from another message: it expires (`not_run`). The caller holds the thread (its locks): no other turn of
        it runs or waits parked, so a pending parks-mode request of another turn here is a leftover."""
        now = now or utcnow()
        # parked, or being resumed after a decision: that turn has its state, and asks by (turn, call) itself
        parked = select(INBOX.c.turn_id).where(INBOX.c.parked_at.is_not(None), INBOX.c.state.in_(HELD_STATES),
                                               INBOX.c.turn_id.is_not(None))
        async with self.engine.begin() as conn:
            rows = (await conn.execute(select(A).where(
                A.c.session_id == new.session_id, A.c.status == "pending", A.c.tool == new.tool,
                A.c.arguments == new.arguments, A.c.turn_id != new.turn_id, A.c.heartbeat_at.is_(None),
                A.c.turn_id.not_in(parked)).order_by(A.c.id.desc()))).all()
            same = [r for r in rows if _same_call(_approval(r), new)]
            unposted = [r.id for r in same if r.message_ref is None]
            if unposted:
                await conn.execute(update(A).where(A.c.id.in_(unposted), A.c.status == "pending")
                                   .values(status="expired", decided_at=now, outcome="not_run"))
            for row in (r for r in same if r.message_ref is not None):
                moved = await conn.execute(update(A).where(A.c.id == row.id, A.c.turn_id == row.turn_id,
                                                           A.c.status == "pending")
                                           .values(turn_id=new.turn_id, call_id=new.call_id))
                if moved.rowcount == 1:
                    taken = (await conn.execute(select(A).where(A.c.id == row.id))).first()
                    return _approval(taken) if taken is not None else None
        return None

    async def decide(self, approval_id: int, status: Literal["approved", "denied"], by: str,
                     now: datetime | None = None) -> Move:
        """Truthy when this decision is the one that counts (the row was pending and had not expired)."""
        now = now or utcnow()
        return await self._move(approval_id, {"status": status, "decided_by": by, "decided_at": now},
                                A.c.expires_at > now, now)

    async def expire(self, approval_id: int, now: datetime | None = None) -> Move:
        now = now or utcnow()
        return await self._move(approval_id, {"status": "expired", "decided_at": now}, None, now)

    async def _move(self, approval_id: int, values: dict[str, Any], extra: Any, now: datetime) -> Move:
        where = [A.c.id == approval_id, A.c.status == "pending"]
        if extra is not None:
            where.append(extra)
        turn = select(A.c.turn_id).where(A.c.id == approval_id).scalar_subquery()
        async with self.engine.begin() as conn:
            # first a write on the turn's inbox row: it orders this transaction against the turn parking
            # (PostgreSQL: the row's lock; SQLite: the write lock), so neither misses the other
            await conn.execute(update(INBOX).where(INBOX.c.turn_id == turn).values(updated_at=now))
            result = await conn.execute(update(A).where(*where).values(**values))
            if result.rowcount != 1:
                return ""
            return await self._wake(conn, turn, now)

    @staticmethod
    async def _wake(conn: AsyncConnection, turn: Any, now: datetime) -> Move:
        woke = await conn.execute(update(INBOX).where(INBOX.c.turn_id == turn, INBOX.c.state == "parked")
                                  .values(state="claimed", lease_owner=None, lease_until=None, updated_at=now))
        if woke.rowcount:
            return "woke"
        held = await conn.execute(select(INBOX.c.id).where(
            INBOX.c.turn_id == turn, INBOX.c.state.in_(OPEN_STATES),
            or_(INBOX.c.parked_at.is_not(None), INBOX.c.lease_until > now)).limit(1))
        return "live" if held.first() is not None else "decided"

    async def claim_run(self, approval_id: int) -> bool:
        async with self.engine.begin() as conn:
            result = await conn.execute(update(A).where(A.c.id == approval_id, A.c.status == "approved",
                                                        A.c.outcome.is_(None)).values(outcome="running"))
            return result.rowcount == 1

    async def parked_pending(self) -> list[Approval]:
        parked = select(INBOX.c.turn_id).where(INBOX.c.state == "parked")
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(A).where(A.c.status == "pending", A.c.turn_id.in_(parked))
                                       .order_by(A.c.id))).all()
        return [_approval(r) for r in rows]

    async def pending(self, now: datetime) -> list[Approval]:
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(A).where(A.c.status == "pending", A.c.expires_at > now)
                                       .order_by(A.c.id))).all()
        return [_approval(r) for r in rows]

    async def set_message(self, approval_id: int, ref: str) -> None:
        await self._set(approval_id, message_ref=ref)

    async def heartbeat(self, approval_id: int, at: datetime | None) -> None:
        """The waiting turn is alive (at = now), or gone (None: a click is told nobody waits any more)."""
        await self._set(approval_id, heartbeat_at=at)

    async def set_outcome(self, approval_id: int, outcome: str) -> None:
        await self._set(approval_id, outcome=outcome)

    async def _set(self, approval_id: int, **values: Any) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(update(A).where(A.c.id == approval_id).values(**values))
