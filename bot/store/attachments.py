"""`attachments` rows: one per file attached to a turn's message, queued on the write-behind writer after the
turn's own row (so a finished turn has them committed, like its llm_calls and tool_invocations)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, insert

from bot.engine.context import AttachmentRecord
from bot.store.models import AttachmentRow, utcnow
from bot.store.writer import WriteBehind

A = cast(Table, AttachmentRow.__table__)
_INSERT_ATTACHMENT = insert(A)


def _fit(value: str, limit: int | None = None) -> str:
    """PostgreSQL refuses NUL and enforces VARCHAR lengths: a file name comes from whoever attached it."""
    value = value.replace("\x00", "\ufffd")
    return value if limit is None or len(value) <= limit else value[: limit - 1] + "…"


def attachment_params(session_id: str, turn_id: str, r: AttachmentRecord) -> dict[str, Any]:
    return {"session_id": session_id, "turn_id": turn_id, "name": _fit(r.name, 255),
            "mimetype": _fit(r.mimetype or "application/octet-stream", 128), "size": r.size, "sha256": r.sha256,
            "origin": _fit(r.origin, 255), "given": r.given, "detail": _fit(r.detail), "created_at": utcnow()}


def record_attachments(writes: WriteBehind, session_id: str, turn_id: str,
                       records: Sequence[AttachmentRecord]) -> None:
    for r in records:
        writes.put(_INSERT_ATTACHMENT, attachment_params(session_id, turn_id, r), turn_id)
