"""No text the bot posts can wake up a whole channel: broadcast pings are defused in the FINAL platform text,
after the Markdown conversion, on every path that posts (answers, notify, schedules, errors, long answers),
on Slack and on Discord. What reaches the fake platforms over real sockets is what is checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.chat.discord.rest import DiscordOutbox as DiscordPoster
from bot.chat.platforms import defuse_broadcasts
from bot.chat.slack.output import OutputLimits, SlackPoster
from bot.chat.slack.rest import SlackOutbox
from tests.chat.slack_harness import answered, mention, start_bot
from tests.conftest import make_settings
from tests.fakes.discord_server import OPS_ALERTS, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack

# Slack broadcasts are <!channel>, <!here>, <!everyone>, <!subteam^ID>; Discord's are @everyone and @here.
SLACK_PING = re.compile(r"<!|(?<!\u2060)@(channel|here|everyone)\b", re.IGNORECASE)
DISCORD_PING = re.compile(r"@(everyone|here)\b", re.IGNORECASE)

ATTACKS = [
    "[wake up](!channel)",
    "![x](!here)",
    "[all](<!everyone>)",
    "[team](!subteam^S0123ABC)",
    "[loud](!CHANNEL)",
    "quoted from a log: [wake up](!channel) and ![x](!here) on one line",
    "**[bold link](!here)**",
    "- [in a list](!everyone)",
    "# [heading](!channel)",
    "| a | b |\n|---|---|\n| [x](!here) | y |",
    "@channel @here @everyone plain",
]


def slack_text(fake: FakeSlack, channel: str) -> str:
    return "\n".join(str(p["text"]) for p in fake.posts(channel))


@pytest.mark.parametrize("markdown", ATTACKS)
async def test_slack_answer_text_carries_no_broadcast(fake_slack: FakeSlack, markdown: str):
    poster = SlackPoster(AsyncWebClient(token="xoxb-t", base_url=fake_slack.api_url), OutputLimits())
    await poster.post("C_GENERAL", markdown)
    text = slack_text(fake_slack, "C_GENERAL")
    assert text and not SLACK_PING.search(text), text


async def test_a_slack_link_to_channel_still_shows_its_words(fake_slack: FakeSlack):
    poster = SlackPoster(AsyncWebClient(token="xoxb-t", base_url=fake_slack.api_url), OutputLimits())
    await poster.post("C_GENERAL", "see [wake up](!channel) and <@U123>")
    [post] = fake_slack.posts("C_GENERAL")
    assert post["text"] == "see &lt;!channel|wake up&gt; and <@U123>"  # shown as text; a user mention stays


async def test_slack_long_and_split_answers_carry_no_broadcast(fake_slack: FakeSlack):
    poster = SlackPoster(AsyncWebClient(token="xoxb-t", base_url=fake_slack.api_url),
                         OutputLimits(message_chars=200, file_threshold_chars=2000))
    block = "\n".join(f"line {i} [wake up](!channel)" for i in range(40))
    await poster.post("C_GENERAL", block)  # split into several messages
    await poster.post("C_OPS", block * 3)  # a preview plus answer.md
    for channel in ("C_GENERAL", "C_OPS"):
        text = slack_text(fake_slack, channel)
        assert "wake up" in text and not SLACK_PING.search(text)


async def test_slack_notify_and_schedule_posts_carry_no_broadcast(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    settings = make_settings(sqlite_url, fake_llm, agents_dir, slack_bot_token="xoxb-t",
                             slack_api_url=fake_slack.api_url)
    outbox = SlackOutbox(settings)  # what notify and scheduled reports post through
    await outbox.post("#ops-alerts", "disk full [wake up](!channel) <!here> @everyone")
    text = slack_text(fake_slack, "C_OPS_ALERTS")
    assert "disk full" in text and not SLACK_PING.search(text)


async def test_a_slack_answer_quoting_a_log_pings_nobody(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, agents_dir)
    try:
        fake_llm.reply("The log says: `x` [wake up](!channel) ![x](!here) [t](!subteam^S1|oncall)")
        await bot.deliver(mention("what does the log say?", ts="1900.000100"))
        await answered(fake_slack, "1900.000100")
    finally:
        await bot.stop()
    text = slack_text(fake_slack, "C_OPS")
    assert "The log says" in text and not SLACK_PING.search(text), text


async def test_discord_posts_carry_no_broadcast_as_text(
    fake_discord: FakeDiscord, fake_llm: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    settings = make_settings(sqlite_url, fake_llm, agents_dir, discord_bot_token="discord-token-0123456789",
                             discord_api_url=fake_discord.api_url)
    poster = DiscordPoster(settings)
    try:
        await poster.post(str(OPS_ALERTS), "site down @everyone @here [wake up](!channel)")
        await poster.post(str(OPS_ALERTS), "long @everyone\n" * 400)  # split into several messages
    finally:
        await poster.stop()
    posted = fake_discord.posted_in(OPS_ALERTS)
    assert len(posted) > 2
    assert all(not DISCORD_PING.search(p.content) for p in posted)
    assert all(p.body["allowed_mentions"] == {"parse": []} for p in posted)
    assert posted[0].content.startswith("site down @\u2060everyone")  # still readable


def test_defusing_keeps_everything_else():
    assert defuse_broadcasts("<@U1> <#C1|ops> <https://x.y|x> a@here.com", "slack") == \
        "<@U1> <#C1|ops> <https://x.y|x> a@here.com"
    assert defuse_broadcasts("half a token <!chan", "slack") == "half a token &lt;!chan"
