"""`/yokebot <sub>` on Slack through the real Bolt: a slash_commands envelope in Socket Mode and a signed HTTP
POST, against the fake Slack (its response_url served there too). docs/commands.md."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlencode

import aiohttp
import pytest

from tests.chat.slack_harness import ALICE, MALLORY, OPS, SECRET, SlackBot, start_bot
from tests.conftest import rows
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack, sign
from tests.helpers import eventually


@pytest.fixture
async def slack_bot(fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str,
                    slack_agents: Path) -> AsyncIterator[SlackBot]:
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents, slack_allowed_users=[ALICE])
    yield bot
    await bot.stop()


async def private(fake: FakeSlack, trigger: str) -> str:
    await eventually(lambda: fake.answered_privately(trigger), what=f"the answer to command {trigger}")
    return fake.answered_privately(trigger)[0]


async def test_ask_in_socket_mode_posts_a_root_and_answers_in_its_thread(
        slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    fake_llm.reply("nginx is fine.")
    payload = fake_slack.command("ask is nginx up?")
    started = time.perf_counter()
    envelope = fake_slack.push_command(payload)
    await eventually(lambda: envelope in fake_slack.acks, what="the ack")
    assert fake_slack.ack_times[envelope] - started < 3.0
    assert not fake_slack.ack_payloads[envelope]  # nothing to say in the ack: the root message says it
    await eventually(lambda: any(c["text"] == "nginx is fine." for c in fake_slack.posts(OPS)), what="the answer")
    root = next(c for c in fake_slack.posts(OPS) if not c.params.get("thread_ts"))
    assert root["text"] == f"<@{ALICE}> asked: is nginx up?"
    answer = next(c for c in fake_slack.posts(OPS) if c["text"] == "nginx is fine.")
    assert answer["thread_ts"] == root.result["ts"]
    assert fake_llm.requests[0]["messages"][-1]["content"] == "is nginx up?"
    turns = await rows(slack_bot.app, "SELECT t.trigger, t.\"user\", s.thread FROM turns t JOIN sessions s "
                                      "ON s.id = t.session_id")
    assert [(t.trigger, t.user, t.thread) for t in turns] == [("command", ALICE, root.result["ts"])]
    claimed = await rows(slack_bot.app, "SELECT event_key, trigger FROM inbox")
    assert [(c.event_key, c.trigger) for c in claimed] == [(payload["trigger_id"], "command")]


async def test_status_help_and_bad_input_answer_the_caller_only(
        slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    status = fake_slack.command("status")
    fake_slack.push_command(status)
    said = await private(fake_slack, status["trigger_id"])
    assert "yokebot is up" in said and "agent `ops`" in said and "model `test-model`" in said
    help_ = fake_slack.command("")
    fake_slack.push_command(help_)
    said = await private(fake_slack, help_["trigger_id"])
    assert "`/yokebot ask &lt;question&gt;`" in said and "/yokebot usage [today|7d]" in said

    unknown = fake_slack.push_command(fake_slack.command("restart prod"))
    await eventually(lambda: unknown in fake_slack.acks, what="the ack")
    text = fake_slack.ack_payloads[unknown]["text"]
    assert "I don't know the command `restart`" in text and "`ask`, `status`, `reset`" in text
    empty = fake_slack.push_command(fake_slack.command("ask"))
    await eventually(lambda: empty in fake_slack.acks, what="the ack")
    assert fake_slack.ack_payloads[empty]["text"].startswith("Type your question after `ask`")

    assert not fake_llm.requests  # no command reached the model
    assert not [c for c in fake_slack.posts() if c.method == "chat.postMessage"]  # nothing in the channel
    turns = await rows(slack_bot.app, "SELECT t.trigger, t.text, s.thread FROM turns t JOIN sessions s "
                                      "ON s.id = t.session_id ORDER BY t.started_at")
    assert [(t.trigger, t.text, t.thread) for t in turns] == [("command", "/yokebot status", "/yokebot"),
                                                              ("command", "/yokebot help", "/yokebot")]
    assert len(await rows(slack_bot.app, "SELECT * FROM inbox")) == 2  # bad input is not stored


async def test_a_refused_user_gets_the_mentions_sentence_and_nothing_runs(
        slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    payload = fake_slack.command("ask restart prod", user=MALLORY)
    fake_slack.push_command(payload)
    said = await private(fake_slack, payload["trigger_id"])
    assert said == "Sorry, you don't have access to me here. Ask your yokebot admin if you need it."
    assert not fake_llm.requests and not fake_slack.posts(OPS)


async def test_reset_in_a_dm_forgets_the_conversation(slack_bot: SlackBot, fake_slack: FakeSlack):
    payload = fake_slack.command("reset", channel="D_ALICE")
    fake_slack.push_command(payload)
    assert (await private(fake_slack, payload["trigger_id"])).startswith("Done: I have forgotten")
    sessions = await rows(slack_bot.app, "SELECT channel, thread FROM sessions")
    assert [(s.channel, s.thread) for s in sessions] == [("D_ALICE", "")]  # the DM's own conversation


@pytest.fixture
async def http_bot(fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str,
                   slack_agents: Path) -> AsyncIterator[SlackBot]:
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents, mode="http")
    yield bot
    await bot.stop()


async def post_command(bot: SlackBot, payload: dict[str, str], secret: str = SECRET) -> tuple[int, str]:
    body = urlencode(payload)
    headers = {**sign(secret, body), "Content-Type": "application/x-www-form-urlencoded"}
    async with aiohttp.ClientSession() as session, session.post(bot.events_url, data=body, headers=headers) as resp:
        return resp.status, await resp.text()


async def test_a_signed_http_command_is_run_and_a_bad_signature_or_another_workspace_is_refused_unstored(
        http_bot: SlackBot, fake_slack: FakeSlack):
    forged = fake_slack.command("status")
    assert (await post_command(http_bot, forged, secret="not-the-secret"))[0] == 401
    other = fake_slack.command("status", team="T_OTHER")
    status, body = await post_command(http_bot, other)
    assert status == 200 and "another Slack workspace" in json.loads(body)["text"]
    assert await rows(http_bot.app, "SELECT * FROM inbox") == []
    assert not fake_slack.responses

    good = fake_slack.command("usage 7d")
    status, body = await post_command(http_bot, good)
    assert status == 200 and not body
    assert (await private(fake_slack, good["trigger_id"])) == "No model calls in this channel the last 7 days."
    again = await post_command(http_bot, good)  # the same trigger_id twice: taken once
    assert again[0] == 200
    assert len(await rows(http_bot.app, "SELECT * FROM inbox")) == 1
    assert len(await rows(http_bot.app, "SELECT * FROM turns")) == 1


async def test_a_command_taken_over_after_a_restart_is_rebuilt_from_its_inbox_row(
        slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    """Recovery hands the adapter the row; the command runs again with its answer to the same response_url."""
    from bot.records.inbox import InboxItem

    payload = fake_slack.command("usage 7d")
    item = InboxItem(7, "slack", payload["trigger_id"], OPS, "/yokebot", "/yokebot usage 7d", "command", ALICE,
                     {"command": "usage", "argument": "7d", "response_url": payload["response_url"]})
    inbound = slack_bot.adapter.rebuild(item)
    assert (inbound.trigger, inbound.claim_key, inbound.thread) == ("command", payload["trigger_id"], "/yokebot")
    await slack_bot.adapter.pipeline.answer(inbound)
    assert fake_slack.answered_privately(payload["trigger_id"]) == ["No model calls in this channel the last 7 days."]

    fake_llm.reply("rebuilt answer")
    ask = InboxItem(8, "slack", "trig-ask", OPS, "command:trig-ask", "why?", "command", ALICE,
                    {"command": "ask", "argument": "why?", "response_url": None})
    await slack_bot.adapter.pipeline.answer(slack_bot.adapter.rebuild(ask))
    root = next(c for c in fake_slack.posts(OPS) if not c.params.get("thread_ts"))
    assert root["text"] == f"<@{ALICE}> asked: why?"
    assert [c["text"] for c in fake_slack.posts(OPS, thread_ts=root.result["ts"])][-1] == "rebuilt answer"


async def test_alerts_lists_only_the_groups_whose_thread_is_in_the_callers_channel(
        slack_bot: SlackBot, fake_slack: FakeSlack):
    """An alert's title names hosts and customers, and its channel may be private: `/yokebot alerts` typed in
    another channel listed every group firing, with a link into that channel. Now: this channel's, and a count."""
    from datetime import UTC, datetime

    from sqlalchemy import insert

    from bot.alerts.tables import AlertGroupRow

    now = datetime.now(UTC)
    async with slack_bot.app.engine.begin() as conn:
        for key, title, channel in (("a", "DiskFull on db1", OPS), ("b", "Exfiltration from payroll-db", "C_SEC")):
            await conn.execute(insert(AlertGroupRow.__table__).values(
                source="alertmanager", group_hash=key, group_key=key, agent="ops", post_to=f"slack:{channel}",
                title=title, state="firing", alerts={"x": "firing"}, root_platform="slack", root_channel=channel,
                root_ref="1700.1", thread="1700.1", fired_at=now))
    payload = fake_slack.command("alerts")
    fake_slack.push_command(payload)
    said = await private(fake_slack, payload["trigger_id"])
    assert "DiskFull on db1" in said and f"/archives/{OPS}/" in said
    assert "payroll" not in said and "C_SEC" not in said
    assert "1 alert group(s) fire in other channels" in said


async def test_alerts_lists_this_channels_groups_however_many_fire_elsewhere(
        slack_bot: SlackBot, fake_slack: FakeSlack):
    """The 20 groups that fired last were read, then those of the caller's channel kept: 20 newer groups anywhere
    else (an alert storm, or alerts pushed on purpose) hid this channel's, and the count of the others was 20."""
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import insert

    from bot.alerts.tables import AlertGroupRow

    now = datetime.now(UTC)
    groups = [("DiskFull on db1", OPS, now - timedelta(hours=1))] + \
        [(f"Noise {i}", "C_SEC", now - timedelta(minutes=i)) for i in range(25)]
    async with slack_bot.app.engine.begin() as conn:
        for i, (title, channel, fired) in enumerate(groups):
            await conn.execute(insert(AlertGroupRow.__table__).values(
                source="alertmanager", group_hash=f"h{i}", group_key=f"k{i}", agent="ops",
                post_to=f"slack:{channel}", title=title, state="firing", alerts={"x": "firing"},
                root_platform="slack", root_channel=channel, root_ref="1700.1", thread="1700.1", fired_at=fired))
    payload = fake_slack.command("alerts")
    fake_slack.push_command(payload)
    said = await private(fake_slack, payload["trigger_id"])
    assert "DiskFull on db1" in said and "Noise" not in said
    assert "25 alert group(s) fire in other channels" in said


async def test_an_alert_title_shows_as_code_whatever_its_alertname_holds(slack_bot: SlackBot, fake_slack: FakeSlack):
    """The title is the alertname label, as parsed from a webhook (line breaks kept): its second line was outside
    the code span, so the caller's answer showed a link and a mention written by whoever writes alert rules."""
    from datetime import UTC, datetime

    from sqlalchemy import insert

    from bot.alerts import payloads, render
    from bot.alerts.tables import AlertGroupRow

    name = "DiskFull\n[re-login here](https://evil.example/login) <@U0BOSS> <https://evil.example|docs>\u202e"
    body = {"version": "4", "status": "firing", "receiver": "r", "groupKey": "k",
            "alerts": [{"status": "firing", "labels": {"alertname": name}, "annotations": {}}]}
    title, _, _ = render.headline(payloads.parse("alertmanager", json.dumps(body).encode()))
    async with slack_bot.app.engine.begin() as conn:
        await conn.execute(insert(AlertGroupRow.__table__).values(
            source="alertmanager", group_hash="a", group_key="a", agent="ops", post_to=f"slack:{OPS}", title=title,
            state="firing", alerts={"x": "firing"}, root_platform="slack", root_channel=OPS, root_ref="1700.1",
            thread="1700.1", fired_at=datetime.now(UTC)))
    payload = fake_slack.command("alerts")
    fake_slack.push_command(payload)
    said = await private(fake_slack, payload["trigger_id"])
    [line] = [line for line in said.splitlines() if "DiskFull" in line]
    assert line.startswith("• `DiskFull [re-login here](https://evil.example/login) &lt;@U0BOSS&gt; "
                           "&lt;https://evil.example|docs&gt;\ufffd` (1 firing")
    assert "<https://evil" not in said and "<@U0BOSS>" not in said


async def test_ask_in_a_channel_the_bot_is_not_in_tells_the_caller(
        slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    """A slash command works in any channel; the root of `ask` cannot be posted where the bot is not a member,
    and the caller heard nothing at all."""
    from bot.chat.core.pipeline import NOT_STARTED

    fake_slack.fail("chat.postMessage", error="not_in_channel")
    payload = fake_slack.command("ask why?", channel="C_ELSEWHERE")
    fake_slack.push_command(payload)
    assert await private(fake_slack, payload["trigger_id"]) == NOT_STARTED
    assert not fake_llm.requests
