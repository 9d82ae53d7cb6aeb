"""`YOKEBOT_SLACK_SUGGESTED_PROMPTS` is posted by yokebot like any text: a broadcast in it pings nobody.
Through the real Bolt assistant middleware against the fake Slack."""

from __future__ import annotations

from pathlib import Path

from tests.chat.slack_harness import start_bot
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack, event_callback
from tests.helpers import eventually


async def test_suggested_prompts_are_defused(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path
):
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents,
                          slack_suggested_prompts="Wake <!channel>; ask [all](!here); tell @everyone")
    try:
        fake_slack.push(event_callback({
            "type": "assistant_thread_started", "event_ts": "1700.000600",
            "assistant_thread": {"user_id": "U_ALICE", "channel_id": "D_ALICE", "thread_ts": "1700.000600",
                                 "context": {}}}))
        await eventually(lambda: fake_slack.calls_to("assistant.threads.setSuggestedPrompts"))
    finally:
        await bot.stop()
    [call] = fake_slack.calls_to("assistant.threads.setSuggestedPrompts")
    shown = [f"{p['title']} {p['message']}" for p in call["prompts"]]
    assert len(shown) == 3 and "Wake" in shown[0] and "tell" in shown[2]
    for text in shown:
        assert "<!" not in text and "](!" not in text and "@everyone" not in text, text
