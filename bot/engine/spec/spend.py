"""`spend:` in AGENT.md: hard caps on what an agent may spend per UTC day and month, across every instance
sharing the database (bot/engine/run/spend.py enforces them; docs/guardrails.md "Spend caps")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SpendScopeKind = Literal["agent", "channel"]


class SpendSpec(BaseModel):
    """Every cap is off unless set. `scope: channel` gives each channel the agent answers in caps of its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    daily_usd: float | None = Field(default=None, gt=0)  # USD per UTC day, from YOKEBOT_MODEL_PRICES
    monthly_usd: float | None = Field(default=None, gt=0)  # USD per UTC calendar month
    daily_tokens: int | None = Field(default=None, ge=1)  # prompt + completion tokens per UTC day
    scope: SpendScopeKind = "agent"

    @property
    def any(self) -> bool:
        return self.daily_usd is not None or self.monthly_usd is not None or self.daily_tokens is not None

    @property
    def in_usd(self) -> bool:
        return self.daily_usd is not None or self.monthly_usd is not None
