"""`CommandFacts` (bot/records/commands.py) on the database: what `/yokebot approvals|alerts|usage|status` read
(docs/commands.md). Built by the composition root, handed to the platforms in `PlatformParts`."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.alerts.tables import AlertGroupRow
from bot.approvals.desk import ApprovalDesk
from bot.config import ModelPrice
from bot.observability.usage import price_for
from bot.records.commands import FiringAlert, UsageLine, WaitingApproval
from bot.store.models import ApprovalRow, LLMCallRow, SessionRow

A, G, L, S = ApprovalRow.__table__, AlertGroupRow.__table__, LLMCallRow.__table__, SessionRow.__table__
MAX_LISTED = 20  # a command's answer lists at most this many


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)  # SQLite hands back naive UTC


def _firing(where: tuple[str, str] | None) -> list[ColumnElement[bool]]:
    """Firing groups; `where` (platform, channel): those whose thread is in the channel (its root there, or on
    Discord the thread itself), chosen by the query, not after it: the latest groups of all may hold none of
    this channel's (an alert storm elsewhere)."""
    if where is None:
        return [G.c.state == "firing"]
    platform, channel = where
    return [G.c.state == "firing", G.c.root_platform == platform,
            or_(G.c.root_channel == channel, G.c.thread == channel)]


class SqlCommandFacts:
    def __init__(self, engine: AsyncEngine, desk: ApprovalDesk, prices: Mapping[str, ModelPrice]) -> None:
        self.engine, self.desk, self.prices = engine, desk, prices

    async def waiting_approvals(self, platform: str, user: str, groups: frozenset[str]) -> list[WaitingApproval]:
        found = await self.desk.waiting_for(platform, user, groups)
        return [WaitingApproval(a.id, a.tool, a.agent, a.platform, a.channel, a.thread, a.message_ref,
                                a.requested_by, a.expires_at) for a in found[:MAX_LISTED]]

    async def pending_approvals(self) -> int:
        async with self.engine.connect() as conn:
            query = select(func.count()).select_from(A).where(A.c.status == "pending",
                                                              A.c.expires_at > datetime.now(UTC))
            return int((await conn.execute(query)).scalar_one())

    async def firing_alerts(self, where: tuple[str, str] | None = None) -> list[FiringAlert]:
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(G).where(*_firing(where)).order_by(G.c.fired_at.desc())
                                       .limit(MAX_LISTED))).all()
        return [FiringAlert(r.title, r.agent, sum(1 for s in dict(r.alerts or {}).values() if s == "firing"),
                            r.root_platform, r.root_channel, r.root_ref, _aware(r.fired_at), r.thread) for r in rows]

    async def firing_count(self, where: tuple[str, str] | None = None) -> int:
        async with self.engine.connect() as conn:
            return int((await conn.execute(select(func.count()).select_from(G).where(*_firing(where)))).scalar_one())

    async def channel_usage(self, platform: str, channel: str, since: datetime) -> list[UsageLine]:
        query = (select(L.c.agent, L.c.model, func.count().label("calls"), func.sum(L.c.prompt_tokens).label("p"),
                        func.sum(L.c.completion_tokens).label("c"))
                 .join(S, S.c.id == L.c.session_id)
                 .where(S.c.platform == platform, S.c.channel == channel, L.c.created_at >= since)
                 .group_by(L.c.agent, L.c.model))
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        by_agent: dict[str, UsageLine] = {}
        for r in rows:
            prompt, completion = int(r.p or 0), int(r.c or 0)
            price = price_for(r.model, self.prices)
            cost = None if price is None else (prompt * price.input + completion * price.output) / 1_000_000
            was = by_agent.get(r.agent)
            if was is not None:
                cost = None if cost is None or was.cost is None else was.cost + cost
                prompt, calls = prompt + was.tokens, int(r.calls) + was.calls
            else:
                calls = int(r.calls)
            by_agent[r.agent] = UsageLine(r.agent, calls, prompt + completion, cost)
        return sorted(by_agent.values(), key=lambda u: (-u.tokens, u.agent))
