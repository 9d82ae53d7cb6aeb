"""`guardrail_events` rows: one per decision of a guardrail rule (docs/guardrails.md), queued on the
write-behind writer after the turn's own row, so a finished turn has them committed like its tool calls."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Table, insert

from bot.engine.messages import GuardEvent
from bot.store.models import GuardrailEventRow, utcnow
from bot.store.writer import WriteBehind

G = cast(Table, GuardrailEventRow.__table__)
_INSERT_EVENT = insert(G)
EXCERPT_CHARS = 500


def _fit(value: str, limit: int) -> str:
    """PostgreSQL refuses NUL and enforces VARCHAR lengths: a rule's name is whoever wrote the AGENT.md's."""
    value = value.replace("\x00", "\ufffd")
    return value if len(value) <= limit else value[: limit - 1] + "…"


def record_guardrail(writes: WriteBehind, session_id: str, turn_id: str, agent: str, event: GuardEvent) -> None:
    params: dict[str, Any] = {
        "session_id": session_id, "turn_id": turn_id, "agent": _fit(agent, 64), "stage": event.stage,
        "rule": _fit(event.rule, 255), "type": event.type, "kind": event.kind, "action": event.action,
        "excerpt": _fit(event.excerpt, EXCERPT_CHARS), "created_at": utcnow(),
    }
    writes.put(_INSERT_EVENT, params, turn_id)
