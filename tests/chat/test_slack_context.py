"""A long Slack thread through real Bolt and slack_sdk, with a model server that enforces a small token
window: every turn is answered in the thread, older turns are compacted, and `reset` in the thread
forgets them without a model call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.chat.slack_harness import answered, mention, message, start_bot
from tests.conftest import rows
from tests.fakes.openai_server import FakeOpenAI, Step, call
from tests.fakes.slack_server import FakeSlack
from tests.helpers import write_agent

CHANNEL, ROOT = "C_RANDOM", "1700.100000"
TURNS = 12


def model(body: dict[str, Any]) -> Step:
    """Every question: one echo of ~10,000 characters, then an answer naming the question."""
    if "tools" not in body:
        return Step("reply", content="Summary: the user asked numbered questions; echo answered each.")
    last = body["messages"][-1]
    if last["role"] == "user":
        return Step("calls", calls=[call("echo", {"text": "log line " * 11, "times": 100})])
    question = next(m for m in reversed(body["messages"]) if m["role"] == "user")["content"]
    return Step("reply", content=f"Answer to {question}")


async def test_a_long_slack_thread_is_compacted_and_every_turn_answers(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, tmp_path: Path
):
    agents = tmp_path / "agents-slack-ctx"
    write_agent(agents, "tester", "tools: [echo]\nmax_iterations: 4\ncontext_window: 6000")
    fake_llm.enforce_window(6000, "vllm")
    fake_llm.handler = model
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, agents)
    try:
        await bot.deliver(mention("question 1", ts=ROOT, channel=CHANNEL))
        await answered(fake_slack, ROOT)
        for n in range(2, TURNS + 1):
            ts = f"1700.1{n:05d}"
            await bot.deliver(message(f"question {n}", ts, CHANNEL, thread_ts=ROOT))
            await answered(fake_slack, ts)
        posts = [p["text"] for p in fake_slack.posts(CHANNEL, thread_ts=ROOT)]
        assert posts == [f"Answer to question {n}" for n in range(1, TURNS + 1)]
        assert fake_llm.refused == 0 and max(fake_llm.prompt_tokens) <= 6000
        compactions = await rows(bot.app, "SELECT count(*) AS n FROM llm_calls WHERE purpose = 'compaction'")
        summaries = await rows(bot.app, "SELECT count(*) AS n FROM summaries WHERE kind = 'summary'")
        assert compactions[0].n == summaries[0].n >= 1

        calls_before = len(fake_llm.requests)
        ts = "1700.200000"
        await bot.deliver(message("reset", ts, CHANNEL, thread_ts=ROOT))
        await answered(fake_slack, ts)
        assert len(fake_llm.requests) == calls_before  # no model call
        assert "forgotten" in fake_slack.posts(CHANNEL, thread_ts=ROOT)[-1]["text"]
        ts = "1700.200001"
        await bot.deliver(message("question 99", ts, CHANNEL, thread_ts=ROOT))
        await answered(fake_slack, ts)
        first = fake_llm.requests[calls_before]
        assert [m["role"] for m in first["messages"]] == ["system", "user"]
        assert "summary" not in first["messages"][0]["content"].lower()
    finally:
        await bot.stop()
