"""A burst of mentions is acknowledged before the bot starts working on any of them: each turn's working mark,
database writes and model calls would otherwise slow the acks of the events still arriving (Slack retries
an event that is not acknowledged within 3 s)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from tests.chat.slack_harness import mention, start_bot
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.helpers import eventually

BURST = 40


async def test_every_event_of_a_burst_is_acknowledged_before_the_first_turn_starts(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, agents_dir)
    pipeline = bot.adapter.pipeline
    # the events come in two waves 0.1 s apart; the burst counts as over after 0.5 s without an event (the
    # default is 20 ms: widened so that the test holds on a loaded machine)
    pipeline.limits = replace(pipeline.limits, ack_quiet_seconds=0.5)
    try:
        for n in range(BURST):
            fake_llm.reply(f"answer {n}")
        payloads = [mention(f"question {n}", f"1800000000.{n:06d}") for n in range(BURST)]
        acks = await asyncio.to_thread(fake_slack.push_burst, payloads, pause_after=BURST // 2, pause=0.1)
        assert all(a is not None for a in acks)
        await eventually(lambda: len(fake_slack.posts()) >= BURST, what="every answer", timeout=60)
        last_ack = max(fake_slack.ack_times.values())
        first_mark = min(c.at for c in fake_slack.calls_to("reactions.add"))
        assert last_ack < first_mark  # no turn began while an event of the burst still waited for its ack
        assert sorted(p["text"] for p in fake_slack.posts()) == sorted(f"answer {n}" for n in range(BURST))
    finally:
        await bot.stop()
