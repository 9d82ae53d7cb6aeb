"""Summary compaction: older turns folded into a running summary by one model call without tools.

The call goes through the turn's model-call path (`calls.py`) and is recorded in `llm_calls` like any
other, with `purpose = "compaction"`. The summary is built on the previous one, so the thread's memory is
one bounded text however long the thread grows."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence

from bot.engine.context.tokens import TokenCounter
from bot.engine.context.window import shorten
from bot.engine.messages import HistoryTurn, Message, ModelResponse
from bot.engine.model.wire import ModelRequest

INSTRUCTIONS = """You keep the memory of a long chat thread between users and an assistant (you) that \
runs tools. Write a summary that lets you carry on the conversation without the transcript: what was \
asked, what the tools showed (names, numbers, errors, hosts, paths, ids), what was decided or done, and \
what is still open. Plain sentences or short bullets; no preamble. At most {words} words."""

RESULT_CHARS = (600, 200)  # tool results in the transcript: generous first, short if it does not fit


def _arguments(text: str) -> str:
    try:
        return json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        return text


def transcript(turn: HistoryTurn, result_chars: int) -> str:
    lines: list[str] = []
    for m in turn.messages:
        if m.role == "user":
            lines.append(f"User: {m.content}")
        elif m.role == "assistant":
            if m.content:
                lines.append(f"Assistant: {m.content}")
            lines.extend(f"Assistant ran {c.name}({_arguments(c.arguments)[:300]})" for c in m.tool_calls)
        elif m.role == "tool":
            lines.append(f"{m.name or 'tool'} returned: {shorten(m.content, result_chars, 'for the summary')}")
    return "\n".join(lines)


Send = Callable[[ModelRequest], Awaitable[ModelResponse]]


class Compactor:
    """A `window.Summarise`: writes the summary request and reads the reply; `send` makes the call (the
    turn's call path, so the turn's hooks hear it like any other)."""

    def __init__(self, send: Send, model_name: str, counter: TokenCounter, words: int = 400) -> None:
        self.send, self.model_name, self.counter, self.words = send, model_name, counter, words

    def _pick(self, previous: str | None, turns: Sequence[HistoryTurn], room: int) -> tuple[str, int]:
        """The transcript of as many of the oldest turns as fit in `room` tokens (at least one)."""
        base = self.counter.text(previous or "") + self.words * 2 + 64
        for chars in RESULT_CHARS:
            parts: list[str] = []
            used = base
            for turn in turns:
                text = transcript(turn, chars)
                cost = self.counter.text(text)
                if used + cost > room and parts:
                    break
                parts.append(text)
                used += cost
            if len(parts) == len(turns) or chars == RESULT_CHARS[-1]:
                return "\n\n".join(parts), len(parts)
        raise AssertionError("unreachable")  # pragma: no cover

    async def __call__(self, previous: str | None, turns: Sequence[HistoryTurn], room: int) -> tuple[str, int]:
        """(new summary, how many of the oldest `turns` it covers)."""
        text, folded = self._pick(previous, turns, room)
        ask = (f"Summary so far:\n{previous}\n\n" if previous else "") + \
            f"Conversation to fold in:\n\n{text}\n\nWrite the updated summary."
        request = ModelRequest(self.model_name, (Message.system(INSTRUCTIONS.format(words=self.words)),
                                                 Message.user(ask)), purpose="compaction")
        response = await self.send(request)
        summary = response.message.content.strip()
        if not summary:
            return previous or "", 0
        return shorten(summary, self.words * 12, "of an over-long summary"), folded
