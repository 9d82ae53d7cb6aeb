"""`yokebot db prune --older-than 30d`: delete sessions with no activity since the cutoff, with their turns,
messages, model calls and tool calls; and schedule runs, seen-event ids, settled inbox rows and notify-ledger
entries (alerts sent) older than the cutoff.
Long-term memories are kept: they are what the agents learned, not an audit trail."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.engine.inbox import OPEN_STATES
from bot.store.models import (
    AttachmentRow,
    InboxRow,
    LLMCallRow,
    MessageRow,
    NotifyLedgerRow,
    ProcessedEventRow,
    ScheduleRunRow,
    SessionRow,
    SummaryRow,
    ToolInvocationRow,
    TurnRow,
)

S = SessionRow.__table__
CHILDREN = (LLMCallRow.__table__, ToolInvocationRow.__table__, MessageRow.__table__, SummaryRow.__table__,
            AttachmentRow.__table__, TurnRow.__table__)


@dataclass(frozen=True)
class PruneResult:
    cutoff: datetime
    deleted: dict[str, int]  # table -> rows (would be) deleted
    dry_run: bool

    @property
    def sessions(self) -> int:
        return self.deleted.get("sessions", 0)


def _targets(cutoff: datetime) -> list[tuple[Any, Any]]:
    """(table, where) in delete order: children before the sessions they belong to."""
    old = select(S.c.id).where(S.c.updated_at < cutoff).scalar_subquery()
    runs, events, inbox = ScheduleRunRow.__table__, ProcessedEventRow.__table__, InboxRow.__table__
    ledger = NotifyLedgerRow.__table__
    return [
        *[(t, t.c.session_id.in_(old)) for t in CHILDREN],
        (S, S.c.updated_at < cutoff),
        (runs, runs.c.planned_at < cutoff),
        (events, events.c.received_at < cutoff),
        # settled inbox rows (their claims); an open one is still owed an answer
        (inbox, (inbox.c.created_at < cutoff) & inbox.c.state.not_in(OPEN_STATES)),
        (ledger, ledger.c.sent_at < cutoff),  # alerts sent: notify's limits and dedup window look back minutes
    ]


async def _count(conn: AsyncConnection, table: Any, where: Any) -> int:
    return int((await conn.execute(select(func.count()).select_from(table).where(where))).scalar_one())


async def prune(engine: AsyncEngine, cutoff: datetime, *, dry_run: bool = False) -> PruneResult:
    """One transaction: all of it is deleted, or none of it."""
    deleted: dict[str, int] = {}
    async with engine.begin() as conn:
        for table, where in _targets(cutoff):
            if dry_run:
                deleted[table.name] = await _count(conn, table, where)
            else:
                deleted[table.name] = (await conn.execute(delete(table).where(where))).rowcount or 0
    return PruneResult(cutoff, deleted, dry_run)
