"""Issue 25: the turns of one thread run in the order their messages were accepted, whichever instance
accepted them. Two instances on one PostgreSQL, Slack HTTP mode, quick follow-ups in one thread posted
alternately to the two: before, one instance ran its own queue back to back while the other's try-lock was
in its backoff, so later messages overtook earlier ones (11 of 24) and the model got histories whose
questions and answers were out of step. Now each turn starts only when no earlier open inbox row of its
thread is left, and the waiting instance is woken (LISTEN/NOTIFY) when it goes."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from tests.chat.slack_harness import OPS, mention, start_bot
from tests.conftest import DIRECT_AND_TRANSACTION_POOLING
from tests.fakes.openai_server import FakeOpenAI, Step
from tests.fakes.slack_server import FakeSlack
from tests.helpers import eventually

pytestmark = DIRECT_AND_TRANSACTION_POOLING  # and through PgBouncer: the locks and LISTEN on the direct URL

FOLLOW_UPS = 12  # fewer than the agent's max_history_turns (20): each history holds every earlier turn
GAP, MODEL_SECONDS = 0.3, 0.6  # a message arrives well before the one before it is answered
MARK = re.compile(r"q(\d\d)")


def marks(text: str) -> list[int]:
    return [int(m) for m in MARK.findall(text)]


async def test_follow_ups_posted_alternately_to_two_instances_run_in_the_order_they_were_accepted(
        pg_database: str, fake_slack: FakeSlack, fake_llm: FakeOpenAI, agents_dir: Path):
    started: list[tuple[int, list[tuple[str, list[int]]]]] = []  # (question, its history) as each turn began

    def answer(body: dict[str, Any]) -> Step:
        talk = [(m["role"], marks(str(m.get("content") or ""))) for m in body["messages"]
                if m["role"] in ("user", "assistant")]
        [question] = talk[-1][1]
        started.append((question, talk[:-1]))
        return Step("reply", content=f"answer to q{question:02d}", delay=MODEL_SECONDS)

    fake_llm.handler = answer
    bots = [await start_bot(fake_slack, fake_llm, pg_database, agents_dir, mode="http")
            for _ in range(2)]
    root = fake_slack.next_ts()
    try:
        for n in range(FOLLOW_UPS):
            ts = fake_slack.next_ts()
            await bots[n % 2].deliver(mention(f"q{n:02d} how is it now?", ts, thread_ts=root))
            await asyncio.sleep(GAP)  # the next one comes while this one is still being answered
        await eventually(lambda: len(fake_slack.posts(channel=OPS, thread_ts=root)) >= FOLLOW_UPS, 60,
                         what="an answer to every follow-up")
    finally:
        for bot in bots:
            await bot.stop()
    assert all(b.http_statuses == [200] * (FOLLOW_UPS // 2) for b in bots)
    order = [q for q, _ in started]
    overtaken = sum(1 for i, q in enumerate(order) if any(p > q for p in order[:i]))
    assert order == list(range(FOLLOW_UPS)), f"turns started in the order {order} ({overtaken} overtook)"
    for question, history in started:  # every earlier question and its answer, in order, before it
        assert history == [(role, [k]) for k in range(question) for role in ("user", "assistant")], (
            question, history)
    answers = [c["text"] for c in fake_slack.posts(channel=OPS, thread_ts=root)]
    assert answers == [f"answer to q{n:02d}" for n in range(FOLLOW_UPS)]
