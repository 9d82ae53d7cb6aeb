"""`yokebot db prune --older-than 30d`: delete sessions with no activity since the cutoff, with their turns,
messages, model calls, tool calls and the runbooks they were given; and schedule runs, seen-event ids, settled
inbox rows, notify-ledger entries (alerts sent), processed alert webhooks and resolved alert groups older than
the cutoff. Long-term memories and incident records are kept: they are what the agents learned, not an audit
trail. A group still firing keeps its thread whatever its age."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import column, delete, func, select, table
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.records.inbox import OPEN_STATES
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
# bot/alerts/tables.py's, by name: the alerts package sits above this one (it imports the app)
HOOKS = table("alert_notifications", column("received_at"), column("state"))
GROUPS = table("alert_groups", column("updated_at"), column("state"))
CHILDREN = (LLMCallRow.__table__, ToolInvocationRow.__table__, MessageRow.__table__, SummaryRow.__table__,
            AttachmentRow.__table__, table("turn_runbooks", column("session_id")), TurnRow.__table__)


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
    hooks, groups = HOOKS, GROUPS
    ledger = NotifyLedgerRow.__table__
    return [
        *[(t, t.c.session_id.in_(old)) for t in CHILDREN],
        (S, S.c.updated_at < cutoff),
        (runs, runs.c.planned_at < cutoff),
        (events, events.c.received_at < cutoff),
        # settled inbox rows (their claims); an open one is still owed an answer
        (inbox, (inbox.c.created_at < cutoff) & inbox.c.state.not_in(OPEN_STATES)),
        (ledger, ledger.c.sent_at < cutoff),  # alerts sent: notify's limits and dedup window look back minutes
        # webhook bodies once processed; groups once resolved (a later firing of one opens a new thread)
        (hooks, (hooks.c.received_at < cutoff) & (hooks.c.state == "done")),
        (groups, (groups.c.updated_at < cutoff) & (groups.c.state == "resolved")),
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
