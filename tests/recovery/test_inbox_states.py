"""What the Slack pipeline records in the inbox for each kind of message: answered, skipped (refused, or a
thread the bot is not part of: no turn was owed), and interrupted (a turn cancelled at shutdown, whose user
got the shutdown notice, so it is not run again after the restart)."""

from __future__ import annotations

from pathlib import Path

from bot.chat.core.pipeline import STOPPED
from tests.chat.slack_harness import ALICE, MALLORY, OPS, mention, message, start_bot
from tests.conftest import rows
from tests.fakes.openai_server import FakeOpenAI, Step
from tests.fakes.slack_server import FakeSlack
from tests.helpers import eventually


async def test_each_message_ends_in_the_inbox_state_that_says_what_happened(
        fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, agents_dir: Path):
    def answer(body: dict) -> Step:
        text = str(body["messages"][-1]["content"])
        return Step("reply", content="done", delay=30.0 if "slow" in text else 0.0)

    fake_llm.handler = answer
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, agents_dir, slack_allowed_users=[ALICE],
                          slack_drain_seconds=0.5)
    stopped = False
    try:
        ok, refused, slow = (fake_slack.next_ts() for _ in range(3))
        stranger_thread, follow_up = fake_slack.next_ts(), fake_slack.next_ts()
        await bot.deliver(mention("hello", ok))
        await bot.deliver(mention("hello", refused, user=MALLORY))
        await bot.deliver(message("not for you", follow_up, OPS, thread_ts=stranger_thread))
        await bot.deliver(mention("a slow one", slow))
        await bot.wait_acked(4)
        await eventually(lambda: fake_slack.posts(channel=OPS, thread_ts=ok), what="the answer")
        await eventually(lambda: len(fake_llm.requests) >= 2, what="the slow turn at the model")
        await bot.stop()  # the slow turn is cancelled after the drain time; its user is told
        stopped = True
        assert [c["text"] for c in fake_slack.posts(channel=OPS, thread_ts=slow)] == [STOPPED]
        states = dict(await rows(bot.app, "SELECT event_key, state FROM inbox"))
    finally:
        if not stopped:
            await bot.stop()
    assert states == {f"{OPS}:{ok}": "answered", f"{OPS}:{refused}": "skipped",
                      f"{OPS}:{follow_up}": "skipped", f"{OPS}:{slow}": "interrupted"}
