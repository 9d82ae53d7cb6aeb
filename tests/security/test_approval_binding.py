"""An approval click counts only on the message that asked for that request: a button whose value (Slack) or
custom_id (Discord) names another request, or the request's id clicked on another message or channel, decides
nothing and the clicker gets one sentence. Through real Bolt and real discord.py against the fakes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.approvals.desk import ACTION_APPROVE, NOT_THIS_MESSAGE, NOT_YOURS
from tests.approvals.harness import BOSS, approval_rows, blocks_of, fast, gated_agent, slack_request
from tests.approvals.test_discord import gated, request_message, start, stop, texts
from tests.approvals.test_slack import ASK_TS, click
from tests.chat.slack_harness import OPS, answered, mention, start_bot
from tests.fakes.discord_server import ALICE, BOB, FakeDiscord, Posted
from tests.fakes.openai_server import FakeOpenAI, call
from tests.fakes.slack_server import FakeSlack
from tests.helpers import RESTARTS, eventually


@pytest.fixture
def script(fake_llm: FakeOpenAI) -> FakeOpenAI:
    RESTARTS.clear()
    fake_llm.calls(call("restart_service", {"service": "nginx"}, "call_restart")).reply("Done.")
    return fake_llm


async def test_slack_a_click_on_another_message_naming_this_request_decides_nothing(
    fake_slack: FakeSlack, script: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    gated_agent(agents_dir)
    bot = await start_bot(fake_slack, script, sqlite_url, agents_dir)
    fast(bot.app)
    try:
        await bot.deliver(mention("restart nginx please", ASK_TS))
        channel, ts, approval_id = await slack_request(fake_slack)
        # another message's buttons (request D's), its value edited to name this request (E)
        await click(bot, BOSS, ACTION_APPROVE, approval_id, "1700000999.000001", channel=channel)
        # this request's own message ts, but in another channel
        await click(bot, BOSS, ACTION_APPROVE, approval_id, ts, channel="C_ELSEWHERE")
        private = await eventually(lambda: len(fake_slack.calls_to("chat.postEphemeral")) == 2
                                   and fake_slack.calls_to("chat.postEphemeral"), what="two private answers")
        assert [c.params["text"] for c in private] == [NOT_THIS_MESSAGE, NOT_THIS_MESSAGE]
        (row,) = await approval_rows(bot.app)
        assert row.status == "pending" and RESTARTS["nginx"] == 0  # nothing was decided

        await click(bot, BOSS, ACTION_APPROVE, approval_id, ts, channel=channel)  # the real button still works
        await answered(fake_slack, ASK_TS)
        assert RESTARTS["nginx"] == 1
    finally:
        await bot.stop()
    assert channel == OPS


async def test_discord_a_click_on_another_message_naming_this_request_decides_nothing(
    sqlite_url: str, script: FakeOpenAI, agents_dir: Path, fake_discord: FakeDiscord
):
    gated(agents_dir)
    app, adapter = await start(sqlite_url, script, agents_dir, fake_discord)
    try:
        asked = fake_discord.mention("restart nginx please", author=ALICE)
        post, approval_id = await request_message(fake_discord)
        other = Posted(post.channel, post.id + 1000, "another request", {})  # request D's message
        fake_discord.click(f"{ACTION_APPROVE}:{approval_id}", other, BOB)
        (cb,) = await eventually(lambda: fake_discord.callbacks, what="the answer to the click")
        assert (cb.type, cb.ephemeral, cb.data["content"]) == (4, True, NOT_THIS_MESSAGE)
        (row,) = await approval_rows(app)
        assert row.status == "pending" and RESTARTS["nginx"] == 0

        fake_discord.click(f"{ACTION_APPROVE}:{approval_id}", post, BOB)  # the real button still works
        await eventually(lambda: "Done." in texts(fake_discord, asked), what="the answer")
        assert RESTARTS["nginx"] == 1
    finally:
        await stop(app, adapter)


async def test_slack_a_user_id_equal_to_an_approver_group_id_is_not_an_approver(
    fake_slack: FakeSlack, script: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    gated_agent(agents_dir)  # approvers: U_BOSS and the user group S_ONCALL
    bot = await start_bot(fake_slack, script, sqlite_url, agents_dir)
    fast(bot.app)
    try:
        await bot.deliver(mention("restart nginx please", ASK_TS))
        channel, ts, approval_id = await slack_request(fake_slack)
        await click(bot, "S_ONCALL", ACTION_APPROVE, approval_id, ts, channel=channel)
        (private,) = await eventually(lambda: fake_slack.calls_to("chat.postEphemeral"), what="the private answer")
        assert private.params["text"] == NOT_YOURS
        (row,) = await approval_rows(bot.app)
        assert row.status == "pending" and RESTARTS["nginx"] == 0
        await click(bot, BOSS, ACTION_APPROVE, approval_id, ts, channel=channel)
        await answered(fake_slack, ASK_TS)
    finally:
        await bot.stop()
    shown = json.dumps([blocks_of(c) for c in fake_slack.calls_to("chat.update")])
    assert "Approved by <@U_BOSS>" in shown and "<!subteam^S_ONCALL>" not in shown
