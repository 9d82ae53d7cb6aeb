"""The base of every tool's settings (the profile's `tools:` entry). Its own module: profiles validate
settings and tools declare them, and neither should import the other for it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from bot.engine.spec.approval import ApprovalSpec


class ToolSettings(BaseModel):
    """Per-tool settings from the profile's `tools:` mapping. Tools subclass this; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: float | None = None
    max_attempts: int | None = None
    approval: ApprovalSpec | None = None  # every call waits for a human's approval (docs/approvals.md)

    def folders(self) -> tuple[str, ...]:
        """The folders this tool reads from (its `roots:`), for `yokebot doctor` to check they exist; a tool
        that reads no folder keeps this default."""
        return ()
