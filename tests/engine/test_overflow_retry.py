"""A context-length error is retried only with a prompt that compaction or squeezing made strictly smaller:
a prompt that cannot be cut ends the turn at once with the apology, instead of being refused three times.
Through AgentService -> ReActLoop -> the real openai SDK -> the fake server answering 400
context_length_exceeded, audited in `llm_calls`."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

from bot.engine import replies
from bot.engine.errors import ContextOverflow
from tests.conftest import rows
from tests.engine.test_context import is_compaction, make_app, req, thread_model
from tests.fakes.openai_server import FakeOpenAI, Step

REFUSAL = ("This model's maximum context length is 4096 tokens. However, your messages resulted in 5000 tokens. "
           "Please reduce the length of the messages.")


def refuse_every_turn(body: dict[str, Any]) -> Step:
    """A server that refuses every turn prompt as too long (whatever its size); summaries still work."""
    if is_compaction(body):
        return thread_model(body)
    return Step("fail", status=400, code="context_length_exceeded", content=REFUSAL)


def turn_sizes(bodies: list[dict[str, Any]]) -> list[int]:
    """The size of each turn prompt sent (compaction's own calls left out)."""
    return [len(json.dumps(b["messages"])) for b in bodies if not is_compaction(b)]


def the_sentence() -> str:
    return replies.model_failed(ContextOverflow("the conversation is too long for the model's context window"))


async def test_a_prompt_that_cannot_be_made_smaller_is_sent_once(sqlite_url: str, fake_llm: FakeOpenAI,
                                                                 tmp_path: Path):
    app = await make_app(sqlite_url, fake_llm, tmp_path, "tools: [dump]\nmax_iterations: 4")
    try:
        fake_llm.handler = refuse_every_turn
        result = await app.service.handle(req("question 1"))
        assert len(fake_llm.requests) == 1, turn_sizes(fake_llm.requests)  # before: the same prompt three times
        assert result.answer == the_sentence() and result.stopped_by == "error"
        calls = await rows(app, "SELECT purpose, error FROM llm_calls WHERE turn_id = :t", t=result.turn_id)
        assert len(calls) == 1 and calls[0].purpose == "turn" and "400" in calls[0].error
    finally:
        await app.close()


async def test_a_long_history_is_retried_only_while_each_prompt_is_smaller(sqlite_url: str, fake_llm: FakeOpenAI,
                                                                          tmp_path: Path):
    app = await make_app(sqlite_url, fake_llm, tmp_path, "tools: [dump]\nmax_iterations: 4\ncontext_window: 16000")
    try:
        fake_llm.handler = thread_model
        for n in range(1, 4):  # three turns, each with a 10,000-character tool result
            assert (await app.service.handle(req(f"question {n}"))).error is None
        before = len(fake_llm.requests)
        fake_llm.handler = refuse_every_turn
        result = await app.service.handle(req("question 4"))
        sizes = turn_sizes(fake_llm.requests[before:])
        assert 2 <= len(sizes) <= 3, sizes  # the first, then only retries that cut something
        assert all(later < earlier for earlier, later in pairwise(sizes)), sizes
        assert sizes[-1] < sizes[0] / 4  # the history went into the summary
        assert any(is_compaction(b) for b in fake_llm.requests[before:])
        assert result.answer == the_sentence() and result.stopped_by == "error"
    finally:
        await app.close()
