"""History that a crash left broken, made valid again: every tool call gets its result (used by the prompt
builder and by the token window, so it sits below both)."""

from __future__ import annotations

from collections.abc import Sequence

from bot.engine.messages import Message, ToolCall

__all__ = ["INTERRUPTED", "UNANSWERED", "closed", "repair_tool_pairs"]

INTERRUPTED = "(no result was recorded: the earlier turn was interrupted before this tool finished)"
UNANSWERED = "(no answer: this turn was stopped before it finished)"


def closed(turn: Sequence[Message]) -> Sequence[Message]:
    """An earlier turn's messages, ending with an answer: a turn stopped (Ctrl-C, SIGTERM, a crash) before the
    model answered ends with the user's message or with tool results, and the next request would carry two
    user messages in a row (which strict chat templates refuse, and which reads as one question to the model).
    Such a turn gets a short assistant note, in the prompt only; the stored history stays as it happened."""
    if not turn or (turn[-1].role == "assistant" and not turn[-1].tool_calls):
        return turn
    return (*turn, Message.assistant(UNANSWERED))


def repair_tool_pairs(history: Sequence[Message]) -> list[Message]:
    """Every assistant tool call gets exactly one tool result, right after it; stray results are dropped.
    A turn cut short by a crash would otherwise make every later request invalid."""
    out: list[Message] = []
    pending: list[ToolCall] = []

    def close_pending() -> None:
        out.extend(Message.tool(c.id, c.name, INTERRUPTED) for c in pending)
        pending.clear()

    for msg in history:
        if msg.role == "tool":
            match = next((c for c in pending if c.id == msg.tool_call_id), None)
            if match is not None:
                pending.remove(match)
                out.append(msg)
            continue
        close_pending()
        out.append(msg)
        pending.extend(msg.tool_calls)
    close_pending()
    return out
