"""`yokebot usage`: model calls and tokens grouped by agent, model, channel or day, with an estimated cost
from the price table in settings (YOKEBOT_MODEL_PRICES); unpriced models count as tokens only; and each spend
cap set, with what is spent of it now."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.config import ModelPrice
from bot.engine.errors import YokebotError
from bot.engine.run import SPEND_KINDS, SpendKind, caps_of, day_start, month_start, priced
from bot.engine.spec import AgentProfile
from bot.store.models import LLMCallRow, SessionRow, ToolInvocationRow
from bot.store.spend import spent_by_channel, spent_in

L, S, TI = LLMCallRow.__table__, SessionRow.__table__, ToolInvocationRow.__table__
GROUPS = ("agent", "model", "channel", "day")


def price_for(model: str, prices: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """Exact name first, else the longest configured name the model starts with (`gpt-4o` for
    `gpt-4o-2024-08-06`, the dated name the API reports back)."""
    if model in prices:
        return prices[model]
    matches = [name for name in prices if model.startswith(name)]
    return prices[max(matches, key=len)] if matches else None


@dataclass
class UsageRow:
    key: str
    calls: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    unpriced_tokens: int = 0  # tokens of models missing from the price table

    @property
    def priced(self) -> bool:
        return self.unpriced_tokens == 0

    def add(self, calls: int, errors: int, prompt: int, completion: int, price: ModelPrice | None) -> None:
        self.calls += calls
        self.errors += errors
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        if price is None:
            self.unpriced_tokens += prompt + completion
        else:
            self.cost += (prompt * price.input + completion * price.output) / 1_000_000


@dataclass
class ToolUsage:
    tool: str
    by_status: dict[str, int] = field(default_factory=lambda: dict[str, int]())

    @property
    def total(self) -> int:
        return sum(self.by_status.values())


@dataclass(frozen=True, slots=True)
class CapUsage:
    """One spend cap and what is spent of it now (docs/guardrails.md "Spend caps")."""

    agent: str  # `*`: YOKEBOT_SPEND_DAILY_USD, every agent together
    channel: str | None  # `slack:C1` for an agent capped per channel
    period: SpendKind
    cap: float
    spent: float

    @property
    def ratio(self) -> float:
        return self.spent / self.cap


@dataclass
class UsageReport:
    by: str
    since: datetime | None
    rows: list[UsageRow]
    total: UsageRow
    tools: list[ToolUsage]
    caps: list[CapUsage] = field(default_factory=lambda: list[CapUsage]())


def _key(by: str, dialect: str) -> Any:
    if by == "agent":
        return L.c.agent
    if by == "model":
        return L.c.model
    if by == "channel":
        return S.c.platform + ":" + S.c.channel
    if dialect == "postgresql":  # the UTC day, whatever the server's time zone
        return func.to_char(func.timezone("UTC", L.c.created_at), "YYYY-MM-DD")
    return func.substr(L.c.created_at, 1, 10)  # SQLite stores UTC as 'YYYY-MM-DD HH:MM:SS...'


async def cap_usage(conn: AsyncConnection, profiles: Iterable[AgentProfile], daily_usd: float | None,
                    prices: Mapping[str, ModelPrice], now: datetime | None = None) -> list[CapUsage]:
    """Every spend cap set (YOKEBOT_SPEND_DAILY_USD first, then each agent's; an agent capped per channel: each
    channel that spent anything this period) and what is spent of it, from `llm_calls`."""
    now = now or datetime.now(UTC)

    def price(model: str) -> tuple[float, float] | None:
        found = price_for(model, prices)
        return (found.input, found.output) if found is not None else None

    out: list[CapUsage] = []
    seen: set[str] = set()
    for profile in profiles:
        for scope, caps in caps_of(profile, daily_usd):
            if scope.key in seen:
                continue
            seen.add(scope.key)
            month = month_start(now) if caps.monthly_usd is not None else None
            if scope.agent is not None and profile.spend.scope == "channel":
                found = await spent_by_channel(conn, scope, day_start(now), month)
                figures = {f"{p}:{c}": priced(rows, price) for (p, c), rows in sorted(found.items())}
            else:
                figures = {None: priced(await spent_in(conn, scope, day_start(now), month), price)}
            for channel, figure in figures.items():
                for kind in SPEND_KINDS:
                    limit = caps.limit(kind)
                    if limit is not None:
                        out.append(CapUsage(scope.agent or "*", channel, kind, limit, figure.used(kind)))
    return out


async def usage(
    engine: AsyncEngine, *, by: str = "agent", since: datetime | None = None,
    prices: Mapping[str, ModelPrice] | None = None, profiles: Iterable[AgentProfile] = (),
    daily_usd: float | None = None,
) -> UsageReport:
    if by not in GROUPS:
        raise YokebotError(f"--by takes one of {', '.join(GROUPS)}, not {by!r}.")
    key = _key(by, engine.dialect.name).label("key")
    query = select(key, L.c.model, func.count().label("calls"),
                   func.sum(case((L.c.error.is_not(None), 1), else_=0)).label("errors"),
                   func.sum(L.c.prompt_tokens).label("p"), func.sum(L.c.completion_tokens).label("c"))
    if by == "channel":
        query = query.join(S, S.c.id == L.c.session_id)
    tools_query = select(TI.c.tool, TI.c.status, func.count().label("n")).group_by(TI.c.tool, TI.c.status)
    if since is not None:
        query = query.where(L.c.created_at >= since)
        tools_query = tools_query.where(TI.c.created_at >= since)
    query = query.group_by(key, L.c.model)
    async with engine.connect() as conn:
        llm = (await conn.execute(query)).all()
        tool_rows = (await conn.execute(tools_query.order_by(TI.c.tool))).all()
        caps = await cap_usage(conn, profiles, daily_usd, prices or {})
    rows: dict[str, UsageRow] = {}
    total = UsageRow("total")
    for r in llm:
        price = price_for(r.model, prices or {})
        for target in (rows.setdefault(str(r.key), UsageRow(str(r.key))), total):
            target.add(int(r.calls), int(r.errors or 0), int(r.p or 0), int(r.c or 0), price)
    tools: dict[str, ToolUsage] = {}
    for r in tool_rows:
        tools.setdefault(r.tool, ToolUsage(r.tool)).by_status[r.status] = int(r.n)
    ordered = sorted(rows.values(), key=lambda u: u.key) if by == "day" else \
        sorted(rows.values(), key=lambda u: (-(u.prompt_tokens + u.completion_tokens), u.key))
    return UsageReport(by, since, ordered, total, list(tools.values()), caps)
