
"""Slack end to end: real Bolt and slack_sdk against the fake Slack, real openai SDK against the fake model,
real SQL. Socket Mode unless a test says otherwise."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.engine.errors import ToolFailed
from tests.chat.slack_harness import (
    ALICE,
    MALLORY,
    OPS,
    SlackBot,
    answered,
    mention,
    message,
    start_bot,
)
from tests.conftest import rows
from tests.fakes.openai_server import FakeOpenAI, Step, call
from tests.fakes.slack_server import BOT_ID, BOT_USER, FakeSlack, event_callback
from tests.helpers import eventually, tool_messages, write_agent


@pytest.fixture
async def slack_bot(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path
) -> AsyncIterator[SlackBot]:
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents)
    yield bot
    await bot.stop()


# --- the ops scenario -------------------------------------------------------------------------------------
async def test_ops_mention_tails_the_log_alerts_the_team_and_answers_in_the_thread(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI, log_dir: Path
):
    """The story that must always work, with the shipped ops agent and the real tail_log and notify."""
    fake_llm.calls(call("tail_log", {"path": str(log_dir / "error.log"), "contains": "502"}, "c_log"))
    fake_llm.calls(call("notify", {"message": "nginx: 3 x 502 from upstream 10.0.0.7 since 10:00 UTC"}, "c_alert"))
    fake_llm.reply(
        "**Degraded**: 3 x `502` from upstream 10.0.0.7 since 10:00. I alerted #ops-alerts.\n\n"
        "See [the runbook](https://wiki.example/runbook)."
    )

    await slack_bot.deliver(
        mention(
            "check the recent nginx error logs; if something's wrong, push it to the team channel",
            ts="1700.000100",
        )
    )
    await answered(fake_slack, "1700.000100")

    alert = fake_slack.posts("C_OPS_ALERTS")
    assert [p["text"] for p in alert] == ["nginx: 3 x 502 from upstream 10.0.0.7 since 10:00 UTC"]
    reply = fake_slack.posts(OPS, thread_ts="1700.000100")
    assert [p["text"] for p in reply] == [
        "*Degraded*: 3 x `502` from upstream 10.0.0.7 since 10:00. I alerted #ops-alerts.\n\n"
        "See <https://wiki.example/runbook|the runbook>."
    ]
    # the order a user sees: :eyes: at once, the alert, the answer, then :eyes: replaced by a tick
    order = [
        (c.method, c.params.get("name") or c.params.get("channel"))
        for c in fake_slack.calls
        if c.method in ("reactions.add", "reactions.remove", "chat.postMessage")
    ]
    assert order == [
        ("reactions.add", "eyes"),
        ("chat.postMessage", "C_OPS_ALERTS"),
        ("chat.postMessage", OPS),
        ("reactions.remove", "eyes"),
        ("reactions.add", "white_check_mark"),
    ]
    assert all(c["_auth"] == "Bearer xoxb-test-bot-token" for c in fake_slack.calls_to("chat.postMessage"))
    assert len(fake_slack.acks) == 1
    # the model got the shipped ops agent's prompt and tools, the question without the mention, the 502s
    first = fake_llm.requests[0]
    assert first["messages"][0]["content"].startswith("You are yokebot's **ops** agent")
    assert {"tail_log", "notify"} <= {t["function"]["name"] for t in first["tools"]}
    assert first["messages"][-1] == {
        "role": "user",
        "content": "check the recent nginx error logs; if something's wrong, push it to the team channel",
    }
    seen = tool_messages(fake_llm.requests[1])[0]["content"].splitlines()
    assert seen[0] == f"==> {log_dir}/error.log <==" and len(seen) == 4
    assert all("HTTP/1.1 502" in line for line in seen[1:])

    app = slack_bot.app
    sessions = await rows(app, "SELECT id, platform, channel, thread, agent FROM sessions")
    assert [(s.platform, s.channel, s.thread, s.agent) for s in sessions] == [
        ("slack", OPS, "1700.000100", "ops")
    ]
    turn = (await rows(app, "SELECT trigger, user, status, iterations FROM turns"))[0]
    assert (turn.trigger, turn.user, turn.status, turn.iterations) == ("mention", ALICE, "ok", 3)
    assert len(await rows(app, "SELECT id FROM llm_calls WHERE session_id = :s", s=sessions[0].id)) == 3
    tools = await rows(app, "SELECT tool, status, result FROM tool_invocations ORDER BY id")
    assert [(t.tool, t.status) for t in tools] == [("tail_log", "ok"), ("notify", "ok")]
    assert tools[1].result.startswith("Posted to slack:#ops-alerts (ref slack:C_OPS_ALERTS:")
    assert tool_messages(fake_llm.requests[2])[-1]["content"] == tools[1].result


# --- sessions: DMs and threads ----------------------------------------------------------------------------
async def test_dm_conversation_is_one_session_answered_inline(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI
):
    fake_llm.reply("Hello Ada.").reply("You are Ada.")
    await slack_bot.deliver(message("I am Ada", "1700.000200", "D_ALICE"))
    await answered(fake_slack, "1700.000200")
    await slack_bot.deliver(message("who am I?", "1700.000300", "D_ALICE"))
    await answered(fake_slack, "1700.000300")

    posts = fake_slack.posts("D_ALICE")
    assert [(p["text"], p.params.get("thread_ts")) for p in posts] == [
        ("Hello Ada.", None),
        ("You are Ada.", None),
    ]
    sent = [(m["role"], m["content"]) for m in fake_llm.requests[1]["messages"][1:]]
    assert sent == [("user", "I am Ada"), ("assistant", "Hello Ada."), ("user", "who am I?")]
    turns = await rows(slack_bot.app, "SELECT trigger FROM turns")
    assert [t.trigger for t in turns] == ["dm", "dm"]
    assert len(await rows(slack_bot.app, "SELECT id FROM sessions")) == 1


async def test_thread_follow_up_continues_the_session_without_a_mention(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI
):
    fake_llm.reply("The disk is 91% full.").reply("Yes: /var/log is the biggest.")
    await slack_bot.deliver(mention("how full is the disk?", ts="1700.000400", channel="C_RANDOM"))
    await answered(fake_slack, "1700.000400")
    await slack_bot.deliver(message("anything to clean?", "1700.000500", "C_RANDOM", thread_ts="1700.000400"))
    await answered(fake_slack, "1700.000500")

    assert [p["text"] for p in fake_slack.posts("C_RANDOM", thread_ts="1700.000400")] == [
        "The disk is 91% full.",
        "Yes: /var/log is the biggest.",
    ]
    sent = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "user"]
    assert sent == ["how full is the disk?", "anything to clean?"]
    turns = await rows(slack_bot.app, "SELECT trigger FROM turns ORDER BY started_at")
    assert [t.trigger for t in turns] == ["mention", "thread"]
    sessions = await rows(slack_bot.app, "SELECT agent, thread FROM sessions")
    assert [(s.agent, s.thread) for s in sessions] == [("tester", "1700.000400")]  # no channel route: default


async def test_thread_the_bot_is_not_part_of_is_left_alone(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI
):
    fake_slack.add_thread_message(
        "C_RANDOM", "1700.000600", {"user": "U_BOB", "text": "lunch?", "ts": "1700.000600"}
    )
    await slack_bot.deliver(message("pizza", "1700.000700", "C_RANDOM", thread_ts="1700.000600"))
    await slack_bot.deliver(message("not in a thread", "1700.000800", "C_RANDOM"))
    await slack_bot.wait_acked(2)
    await eventually(lambda: fake_slack.calls_to("conversations.replies"), what="the thread check")
    await slack_bot.adapter.stop()
    assert fake_llm.requests == [] and fake_slack.posts() == [] and fake_slack.calls_to("reactions.add") == []
    counted = slack_bot.app.metrics.value
    assert counted("yokebot_adapter_events_total", platform="slack", kind="ignored") == 2
    assert counted("yokebot_adapter_events_total", platform="slack", kind="thread") == 0


async def test_follow_up_after_a_restart_is_recognised_from_the_thread(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path
):
    first = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents)
    fake_llm.reply("first answer").reply("second answer")
    await first.deliver(mention("hi", ts="1700.000900", channel="C_RANDOM"))
    await answered(fake_slack, "1700.000900")
    await first.stop()

    second = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents)
    try:
        await second.deliver(message("and then?", "1700.001000", "C_RANDOM", thread_ts="1700.000900"))
        await answered(fake_slack, "1700.001000")
    finally:
        await second.stop()
    assert [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "user"] == [
        "hi",
        "and then?",
    ]


async def test_follow_ups_can_be_turned_off(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path
):
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents, slack_thread_followups=False)
    try:
        fake_llm.reply("answer")
        await bot.deliver(mention("hi", ts="1700.001100", channel="C_RANDOM"))
        await answered(fake_slack, "1700.001100")
        await bot.deliver(message("more", "1700.001200", "C_RANDOM", thread_ts="1700.001100"))
        await bot.wait_acked(2)
    finally:
        await bot.stop()
    assert len(fake_llm.requests) == 1 and len(fake_slack.posts()) == 1


# --- what is ignored --------------------------------------------------------------------------------------
async def test_own_messages_other_bots_edits_deletes_and_joins_are_acked_and_ignored(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI
):
    thread = "1700.001300"
    fake_slack.add_thread_message(
        "C_RANDOM", thread, {"user": BOT_USER, "text": "earlier answer", "ts": thread}
    )
    events = [
        message("my own answer", "1700.001301", "C_RANDOM", user=BOT_USER, bot_id=BOT_ID, thread_ts=thread),
        message("beep", "1700.001302", "D_ALICE", user="U_OTHERBOT", bot_id="B_OTHER"),
        event_callback(
            {
                "type": "message",
                "subtype": "bot_message",
                "bot_id": "B_OTHER",
                "text": "beep",
                "ts": "1700.001303",
                "channel": "C_RANDOM",
                "thread_ts": thread,
            }
        ),
        event_callback(
            {
                "type": "message",
                "subtype": "message_changed",
                "channel": "D_ALICE",
                "ts": "1700.001304",
                "message": {"user": ALICE, "text": "edited", "ts": "1700.000001"},
            }
        ),
        event_callback(
            {
                "type": "message",
                "subtype": "message_deleted",
                "channel": "D_ALICE",
                "ts": "1700.001305",
                "deleted_ts": "1700.000001",
            }
        ),
        event_callback(
            {
                "type": "message",
                "subtype": "channel_join",
                "user": ALICE,
                "text": "<@U_ALICE> joined",
                "channel": "C_RANDOM",
                "ts": "1700.001306",
            }
        ),
        event_callback({"type": "member_joined_channel", "user": ALICE, "channel": "C_RANDOM"}),
        event_callback(
            {
                "type": "reaction_added",
                "user": ALICE,
                "reaction": "+1",
                "item": {"type": "message", "channel": "C_RANDOM", "ts": thread},
            }
        ),
    ]
    for event in events:
        await slack_bot.deliver(event)
    await slack_bot.wait_acked(len(events))  # every event is acked, so Slack never redelivers it
    await slack_bot.adapter.stop()
    assert fake_llm.requests == [] and fake_slack.posts() == [] and fake_slack.calls_to("reactions.add") == []


# --- access control ---------------------------------------------------------------------------------------
async def test_unauthorised_user_gets_a_polite_refusal_and_no_model_call(
    fake_slack: FakeSlack,
    fake_llm: FakeOpenAI,
    sqlite_url: str,
    slack_agents: Path,
    caplog: pytest.LogCaptureFixture,
):
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents, slack_allowed_users=[ALICE])
    caplog.set_level(logging.WARNING, logger="bot.chat.slack.adapter")
    try:
        await bot.deliver(mention("restart prod", ts="1700.001400", user=MALLORY))
        await eventually(lambda: fake_slack.posts(OPS), what="the refusal")
        fake_llm.reply("Hi Alice.")
        await bot.deliver(mention("hi", ts="1700.001500", user=ALICE))
        await answered(fake_slack, "1700.001500")
    finally:
        await bot.stop()
    refusal = fake_slack.posts(OPS, thread_ts="1700.001400")
    assert len(refusal) == 1 and refusal[0]["text"].startswith("Sorry, you don't have access to me here.")
    assert fake_slack.reactions("1700.001400") == []
    assert len(fake_llm.requests) == 1  # only Alice's
    assert any(
        "refused Slack message 1700.001400 from U_MALLORY" in r.getMessage()
        and "YOKEBOT_SLACK_ALLOWED_USERS" in r.getMessage()
        for r in caplog.records
    )


async def test_profile_access_lists_limit_channels(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    write_agent(
        agents_dir,
        "tester",
        """
tools: [echo]
access:
  channels: ["slack:C_ALLOWED"]
""",
    )
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, agents_dir)
    try:
        fake_llm.reply("allowed here")
        await bot.deliver(mention("hi", ts="1700.001600", channel="C_ELSEWHERE"))
        await eventually(lambda: fake_slack.posts("C_ELSEWHERE"), what="the refusal")
        await bot.deliver(mention("hi", ts="1700.001700", channel="C_ALLOWED"))
        await answered(fake_slack, "1700.001700")
    finally:
        await bot.stop()
    assert fake_slack.posts("C_ELSEWHERE")[0]["text"].startswith("Sorry, you don't have access")
    assert len(fake_llm.requests) == 1


# --- output -----------------------------------------------------------------------------------------------
async def test_rate_limited_post_is_retried_after_retry_after(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI
):
    fake_slack.fail("chat.postMessage", status=429, retry_after=0)
    fake_llm.reply("made it")
    await slack_bot.deliver(mention("hi", ts="1700.001800", channel="C_RANDOM"))
    await answered(fake_slack, "1700.001800")
    posts = fake_slack.posts("C_RANDOM")
    assert [p["text"] for p in posts] == ["made it", "made it"]  # the 429, then the retry that landed
    assert len(fake_llm.requests) == 1


async def test_a_60000_character_answer_is_posted_as_a_file_in_the_thread(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI
):
    answer = "\n".join(f"line {i:05d}: " + "x" * 50 for i in range(960))[:60_000]
    assert len(answer) == 60_000
    fake_llm.reply(answer)
    await slack_bot.deliver(mention("dump everything", ts="1700.001900", channel="C_RANDOM"))
    await answered(fake_slack, "1700.001900")

    posts = fake_slack.posts("C_RANDOM")
    assert len(posts) == 1 and posts[0]["thread_ts"] == "1700.001900"
    assert len(posts[0]["text"]) < 4000 and posts[0]["text"].startswith("line 00000: ")
    assert "60,000 characters" in posts[0]["text"]
    [upload] = fake_slack.uploads.values()
    assert upload.decode() == answer
    [done] = fake_slack.calls_to("files.completeUploadExternal")
    assert (done["channel_id"], done["thread_ts"]) == ("C_RANDOM", "1700.001900")


async def test_a_long_answer_is_split_on_lines_and_code_fences(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI
):
    prose = "\n".join(f"- item {i} is **fine**" for i in range(200))
    code = "```python\n" + "\n".join(f"print({i})" for i in range(300)) + "\n```"
    fake_llm.reply(f"{prose}\n\n{code}")
    await slack_bot.deliver(mention("long one", ts="1700.002000", channel="C_RANDOM"))
    await answered(fake_slack, "1700.002000")
    texts = [p["text"] for p in fake_slack.posts("C_RANDOM", thread_ts="1700.002000")]
    assert len(texts) >= 2 and all(len(t) <= 3900 for t in texts)
    assert all(t.count("```") % 2 == 0 for t in texts)  # every chunk renders its code block on its own
    joined = "\n".join(texts)
    assert "• item 199 is *fine*" in joined and "print(299)" in joined and "```python" not in joined


# --- failures ---------------------------------------------------------------------------------------------
async def test_model_failure_gives_the_user_one_clear_sentence_and_a_failed_mark(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI
):
    for _ in range(3):
        fake_llm.fail(500)
    await slack_bot.deliver(mention("hi", ts="1700.002100", channel="C_RANDOM"))
    await answered(fake_slack, "1700.002100", "x")
    [post] = fake_slack.posts("C_RANDOM", thread_ts="1700.002100")
    assert post["text"].startswith("Sorry, I could not finish this: the model endpoint answered HTTP 500")
    assert "\n" not in post["text"]
    assert fake_slack.reactions("1700.002100")[-2:] == [("reactions.remove", "eyes"), ("reactions.add", "x")]
    turn = (await rows(slack_bot.app, "SELECT status FROM turns"))[0]
    assert turn.status == "error"


async def test_an_unexpected_error_is_one_sentence_too(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path
):
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents, default_agent="no-such-agent")
    try:
        await bot.deliver(mention("hi", ts="1700.002200", channel="C_RANDOM"))
        await answered(fake_slack, "1700.002200", "x")
    finally:
        await bot.stop()
    [post] = fake_slack.posts("C_RANDOM")
    assert post["text"] == (
        "Sorry, something went wrong on my side and I could not answer this; the details are in my logs."
    )


async def test_stop_mid_turn_tells_the_user_instead_of_leaving_eyes(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path
):
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents, slack_drain_seconds=0.2)
    fake_llm.hang(1.0)  # longer than the drain, short enough to end before the fake stops
    await bot.deliver(mention("slow one", ts="1700.002300", channel="C_RANDOM"))
    await eventually(lambda: fake_llm.requests, what="the model call")
    await bot.stop()
    assert bot.adapter.busy == 0
    await asyncio.sleep(1.0)
    [post] = fake_slack.posts("C_RANDOM")
    assert post["text"] == "Sorry, I was restarted before I could finish this; please ask again."
    assert fake_slack.reactions("1700.002300")[-1] == ("reactions.add", "x")


# --- notify through the adapter ---------------------------------------------------------------------------
async def test_notify_posts_by_name_or_id_and_fails_in_one_sentence(
    slack_bot: SlackBot, fake_slack: FakeSlack
):
    notifier = slack_bot.app.notifier
    ref = await notifier.notify("slack:#ops-alerts", "**disk** full")
    assert ref.startswith("slack:C_OPS_ALERTS:")
    assert fake_slack.posts("C_OPS_ALERTS")[0]["text"] == "*disk* full"
    assert (await notifier.notify("slack:C_GENERAL", "hi")).startswith("slack:C_GENERAL:")
    with pytest.raises(ToolFailed, match="no Slack channel #nope"):
        await notifier.notify("slack:#nope", "x")
    fake_slack.fail("chat.postMessage", error="not_in_channel")
    with pytest.raises(ToolFailed, match=r"not_in_channel \(invite the bot"):
        await notifier.notify("slack:C_PRIVATE", "x")
    assert (
        len(fake_slack.calls_to("conversations.list")) == 1
    )  # names are cached (refreshed at most once a minute)


# --- load -------------------------------------------------------------------------------------------------
async def test_fifty_mentions_at_once_all_get_answered_each_in_its_own_session(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI
):
    fake_llm.latency = 0.05

    def handler(body: dict) -> Step:
        said = [m["content"] for m in body["messages"] if m["role"] == "user"]
        return Step("reply", content=" | ".join(said))

    fake_llm.handler = handler
    stamps = [f"1701.{i:06d}" for i in range(50)]
    for i, ts in enumerate(stamps):
        await slack_bot.deliver(mention(f"question {i}", ts=ts, channel="C_RANDOM"))
    for ts in stamps:
        await answered(fake_slack, ts)
    for i, ts in enumerate(stamps):
        await slack_bot.deliver(message(f"follow-up {i}", f"1702.{i:06d}", "C_RANDOM", thread_ts=ts))
    for i in range(50):
        await answered(fake_slack, f"1702.{i:06d}")

    for i, ts in enumerate(stamps):
        texts = [p["text"] for p in fake_slack.posts("C_RANDOM", thread_ts=ts)]
        assert texts == [f"question {i}", f"question {i} | follow-up {i}"]
    assert len(await rows(slack_bot.app, "SELECT id FROM sessions")) == 50
    assert len(fake_llm.requests) == 100 and len(fake_slack.acks) == 100
