"""A Markdown link or image to a broadcast (`[all hands](!channel)`, `![x](!everyone)`) in a streamed answer:
Slack renders a stream's `markdown_text` itself, so the link form must be defused there too, whole in one
fragment or split across fragments. Through the real slack_sdk (and Bolt, for the whole turn) against the fake."""

from __future__ import annotations

import re
from pathlib import Path

from slack_sdk.web.async_client import AsyncWebClient

from bot.chat.slack.live import SlackMessages
from tests.chat.slack_harness import OPS, answered, mention, start_bot
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack

# a Markdown link or image, or a reference definition, whose target is a broadcast
BROADCAST_LINK = re.compile(r"\]\(\s*(<|&lt;)?\s*!|^\s*\[[^\]]*\]:\s*!", re.MULTILINE)
LINKS = "Ping [all hands](!channel) and ![x](!everyone), [y]( <!here>).\n\n[1]: !here\n"


def streamed(fake: FakeSlack) -> list[str]:
    return [str(c.params.get("markdown_text") or "") for c in fake.calls
            if c.method in ("chat.startStream", "chat.appendStream", "chat.stopStream")]


def messages(fake: FakeSlack) -> SlackMessages:
    return SlackMessages(AsyncWebClient(token="xoxb-test-bot-token", base_url=fake.api_url))


async def test_broadcast_links_whole_in_one_fragment_are_defused(fake_slack: FakeSlack):
    slack = messages(fake_slack)
    ts, sent = await slack.start_stream(OPS, "1700.000100", LINKS)
    sent = await slack.append_stream(OPS, ts, sent, LINKS + "More: [wake](!channel).") or sent
    assert await slack.stop_stream(OPS, ts, sent, LINKS + "More: [wake](!channel). Done.")
    held = fake_slack.streams[ts]
    assert "all hands" in held and "Done." in held  # still readable
    assert not BROADCAST_LINK.search(held), held
    assert not any(BROADCAST_LINK.search(s) for s in streamed(fake_slack))


async def test_a_broadcast_link_split_across_fragments_is_never_completed_in_the_stream(fake_slack: FakeSlack):
    slack = messages(fake_slack)
    whole = "Ping [all hands](!channel) now"
    ts, sent = await slack.start_stream(OPS, "1700.000100", whole[:17])  # "Ping [all hands]("
    grown = await slack.append_stream(OPS, ts, sent, whole[:22])  # ... "(!chan"
    if grown is not None:
        sent = grown
        grown = await slack.append_stream(OPS, ts, sent, whole)
    # either the stream refuses the rewritten text (the engine then edits the message), or what it holds
    # is harmless: never a completed broadcast link
    assert not BROADCAST_LINK.search(fake_slack.streams[ts]), fake_slack.streams[ts]


async def test_a_streamed_turn_never_sends_a_broadcast_link(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path
):
    # the fake model writes 8 characters a fragment: the first link spans three fragments
    answer = "Hey [all hands](!channel) and ![x](!everyone): the upstream is down."
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents, model_stream=True, progress_live=True,
                          progress_interval_seconds=0.15)
    try:
        fake_llm.reply(answer, chunk_delay=0.1)
        await bot.deliver(mention("how is nginx?", ts="1700.000900"))
        await answered(fake_slack, "1700.000900")
    finally:
        await bot.stop()
    assert fake_slack.calls_to("chat.startStream")  # it was streamed
    for ts, held in fake_slack.streams.items():
        assert not BROADCAST_LINK.search(held), (ts, held)
    sent = [str(v) for c in fake_slack.calls if c.method.startswith("chat.")
            for k, v in c.params.items() if k in ("text", "markdown_text")]
    # the answer reached the thread: whole in a message's text, or in what a stream holds (its fragments
    # split it anywhere, so it is read joined, as Slack shows it)
    assert any("upstream is down" in s for s in [*sent, *fake_slack.streams.values()]), sent
    assert not any(BROADCAST_LINK.search(s) or "<!channel" in s or "<!everyone" in s for s in sent)
