"""Trace context for what a turn calls out to, without importing OpenTelemetry (docs/observability.md).

A turn's OTel trace id is its turn id: turn ids are 32 hex digits (`uuid4().hex`), which is exactly a W3C
trace id, so `trace=` in the log lines, `turns.id` and the trace viewer's id are the same string. An id
that is not 32 hex digits (a caller's own `TurnRequest.turn_id`) maps to the first 16 bytes of its SHA-256.

`TOOL_CALL` holds the `traceparent` of the tool call running in this task (the span hooks set it when the
call starts and clear it when it ends); the MCP HTTP client sends it with each request (`outgoing`)."""

from __future__ import annotations

import hashlib
import re
from contextvars import ContextVar

_HEX32 = re.compile(r"[0-9a-f]{32}")

TOOL_CALL: ContextVar[str | None] = ContextVar("yokebot_tool_traceparent", default=None)


def trace_id_for(turn_id: str) -> int:
    """The 128-bit trace id of a turn: its id read as hex, or (not 32 hex digits, or all zero) a hash of it."""
    text = turn_id.lower()
    if _HEX32.fullmatch(text) and int(text, 16):
        return int(text, 16)
    return int.from_bytes(hashlib.sha256(turn_id.encode()).digest()[:16], "big") or 1


def traceparent(trace_id: int, span_id: int, sampled: bool) -> str:
    """The W3C `traceparent` header value (version 00)."""
    return f"00-{trace_id:032x}-{span_id:016x}-{'01' if sampled else '00'}"


def outgoing() -> dict[str, str]:
    """Headers for a request made inside a tool call: its `traceparent`, or nothing outside a traced call."""
    value = TOOL_CALL.get()
    return {"traceparent": value} if value else {}
