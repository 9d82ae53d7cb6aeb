"""What is waiting, read from the database when `/metrics` is scraped: open inbox items by state and the age of
the oldest, approvals nobody has decided and those past their timeout. One query per table, at most once every
few seconds however often it is scraped; a database that does not answer in time leaves the last figures (the
readiness probe is what reports it)."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, case, func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.observability.metrics import Metrics
from bot.store.models import ApprovalRow

log = logging.getLogger(__name__)
STATES = ("claimed", "running", "parked")
_INBOX = text("SELECT state, COUNT(*), MIN(updated_at) FROM inbox WHERE state IN ('claimed', 'running', 'parked') "
              "GROUP BY state")


def _aware(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):  # SQLite through a text() query
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class Backlog:
    def __init__(self, engine: AsyncEngine, metrics: Metrics, lease_seconds: float, *, every: float = 5.0,
                 timeout: float = 2.0) -> None:
        self.engine, self.metrics, self.every, self.timeout = engine, metrics, every, timeout
        metrics.inbox_lease.set(lease_seconds)
        for state in STATES:
            metrics.inbox_items.labels(state=state).set(0)
        for state in STATES[:2]:
            metrics.inbox_oldest.labels(state=state).set(0)
        self._read_at = float("-inf")
        self._lock = asyncio.Lock()

    async def refresh(self) -> None:
        """Read the figures unless they were read in the last `every` seconds (scrapes of several Prometheus
        servers share one read)."""
        async with self._lock:
            if time.monotonic() - self._read_at < self.every:
                return
            try:
                async with asyncio.timeout(self.timeout):
                    await self._read()
            except Exception as exc:
                log.warning("metrics: could not read the inbox and approvals (%s)", type(exc).__name__)
            self._read_at = time.monotonic()

    async def _read(self) -> None:
        async with self.engine.connect() as conn:
            inbox = (await conn.execute(_INBOX)).all()
            now = datetime.now(UTC)
            # counted by the database (the status-and-expiry index), not one row per waiting approval per scrape
            waiting, overdue = (await conn.execute(_approvals(now))).one()
        found = {str(state): (int(count), _aware(oldest)) for state, count, oldest in inbox}
        for state in STATES:
            count, oldest = found.get(state, (0, None))
            self.metrics.inbox_items.labels(state=state).set(count)
            if state != "parked":
                age = (now - oldest).total_seconds() if oldest is not None else 0.0
                self.metrics.inbox_oldest.labels(state=state).set(max(age, 0.0))
        self.metrics.approvals_waiting.set(waiting)
        self.metrics.approvals_overdue.set(int(overdue or 0))  # SUM of no row: NULL


def _approvals(now: datetime) -> Select[int, Any]:
    """How many approvals wait for a decision, and how many of them are past their timeout."""
    return select(func.count(), func.sum(case((ApprovalRow.expires_at < now, 1), else_=0))) \
        .where(ApprovalRow.status == "pending")
