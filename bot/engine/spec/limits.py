"""The AGENT.md blocks for context and budgets (`context:`, `budget:`); no imports from the engine, so
profiles, context and guards can all use them without a cycle."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ContextSpec(BaseModel):
    """`context:` in AGENT.md (the window itself is the top-level `context_window:`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reserve_tokens: int | None = Field(default=None, ge=0)  # room for the answer; default window/8, <= 4096
    compact_at: float = Field(default=0.5, gt=0, le=1)  # share of the window earlier turns may take
    keep_turns: int = Field(default=2, ge=0, le=50)  # latest turns never folded into the summary
    tool_result_chars: int = Field(default=2000, ge=200)  # earlier turns' tool results are cut to this
    summary_words: int = Field(default=400, ge=50, le=5000)  # how long a summary may be


class MemorySpec(BaseModel):
    """`memory:` in AGENT.md: how many remembered facts, the most relevant to the message, the system prompt
    holds (docs/knowledge.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    recall: int = Field(default=8, ge=0, le=100)  # 0: no memory section
    max_tokens: int = Field(default=1000, ge=50, le=50_000)  # the section's size at most (estimated: 4 chars a token)


class BudgetSpec(BaseModel):
    """`budget:` in AGENT.md; every limit is off unless set."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_calls: int | None = Field(default=None, ge=1)
    tokens: int | None = Field(default=None, ge=1)  # prompt + completion, all model calls of the turn
    seconds: float | None = Field(default=None, gt=0)
    cost: float | None = Field(default=None, gt=0)  # USD, from YOKEBOT_MODEL_PRICES
