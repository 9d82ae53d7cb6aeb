"""Live progress in Slack, through the real Bolt app and slack_sdk against the fake Slack: a status message
that follows the turn's steps, the answer streamed (chat.startStream/appendStream/stopStream) or, in a
workspace without those methods, shown by chat.update, and always the complete answer at the end."""

from __future__ import annotations

from pathlib import Path

from tests.chat.slack_harness import OPS, SlackBot, answered, mention, message, start_bot
from tests.fakes.openai_server import FakeOpenAI, call
from tests.fakes.slack_server import FakeSlack, event_callback
from tests.helpers import eventually

ANSWER = ("**Degraded**: 3 x `502` from upstream 10.0.0.7 since 10:00. I alerted #ops-alerts, and the "
          "upstream looks fine again since 10:07. Nothing else in the last hour.")
LIVE = {"model_stream": True, "progress_live": True, "progress_interval_seconds": 0.15}


async def live_bot(fake: FakeSlack, llm: FakeOpenAI, db: str, agents: Path, **extra: object) -> SlackBot:
    return await start_bot(fake, llm, db, agents, **{**LIVE, **extra})


def script_three_steps(llm: FakeOpenAI, log_dir: Path, *, answer: str = ANSWER, **last: object) -> None:
    log = str(log_dir / "error.log")
    llm.calls(call("tail_log", {"path": log, "contains": "502"}, "c1"), delay=0.3)
    llm.calls(call("tail_log", {"path": log, "contains": "upstream"}, "c2"), delay=0.3)
    llm.calls(call("notify", {"message": "nginx: 3 x 502 from upstream 10.0.0.7"}, "c3"), delay=0.3)
    llm.reply(answer, **{"chunk_delay": 0.04, **last})


def status_ts(fake: FakeSlack, thread: str) -> str:
    return str(fake.posts(OPS, thread_ts=thread)[0].result["ts"])


async def test_a_three_step_turn_shows_its_steps_and_streams_the_answer(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path, log_dir: Path
):
    bot = await live_bot(fake_slack, fake_llm, sqlite_url, slack_agents)
    try:
        script_three_steps(fake_llm, log_dir)
        await bot.deliver(mention("check nginx", ts="1700.000100"))
        await answered(fake_slack, "1700.000100")
    finally:
        await bot.stop()
    status = fake_slack.texts(status_ts(fake_slack, "1700.000100"))
    assert status[0] == "_thinking…_"  # the first thing a user sees, before any tool ran
    assert any(s.endswith("/nginx/error.log`…") for s in status[1:-1])  # a step while it runs
    assert any("/nginx/error.log` ✓" in s and "_thinking…_" in s for s in status[1:-1])  # then done
    assert "_writing the answer…_" in status[-1]
    assert any(s.startswith("`tail_log …") and "`notify nginx: 3 x 502 from upstream 10.0.0.7` ✓" in s
               for s in status)  # every step was shown while the turn ran
    starts = fake_slack.calls_to("chat.startStream")
    assert len(starts) == 1 and starts[0]["thread_ts"] == "1700.000100"
    ts = str(starts[0].result["ts"])
    assert len(fake_slack.calls_to("chat.appendStream")) >= 2  # the answer grew while it was written
    assert len(fake_slack.calls_to("chat.stopStream")) == 1
    assert fake_slack.streams[ts] == ANSWER  # complete: what was streamed plus the rest at stopStream
    # answered, the status message goes (compact steps): the thread keeps the question and the answer
    assert [d["ts"] for d in fake_slack.calls_to("chat.delete")] == [status_ts(fake_slack, "1700.000100")]
    assert len(fake_slack.posts(OPS, thread_ts="1700.000100")) == 1  # the status; the answer is the stream


async def test_without_streaming_methods_the_answer_is_shown_by_edits_at_most_about_once_a_second(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path, log_dir: Path
):
    fake_slack.streaming = False  # chat.startStream answers unknown_method
    bot = await live_bot(fake_slack, fake_llm, sqlite_url, slack_agents, progress_interval_seconds=1.0)
    try:
        fake_llm.reply(ANSWER, chunk_delay=0.1)  # ~2 s of writing
        await bot.deliver(mention("how is nginx?", ts="1700.000200"))
        await answered(fake_slack, "1700.000200")
        fake_llm.reply("second", chunk_delay=0.1)
        await bot.deliver(mention("and now?", ts="1700.000300"))
        await answered(fake_slack, "1700.000300")
    finally:
        await bot.stop()
    assert len(fake_slack.calls_to("chat.startStream")) == 1  # tried once; the workspace is remembered
    posts = fake_slack.posts(OPS, thread_ts="1700.000200")
    assert posts[0]["text"] == "_thinking…_"
    answer_ts = str(posts[1].result["ts"])
    shown = fake_slack.texts(answer_ts)
    assert 2 <= len(shown) <= 5  # grew by edits, throttled (about one a second over ~2 s)
    assert shown[-1].startswith("*Degraded*: 3 x `502`") and shown[-1].endswith("the last hour.")
    assert any(s.endswith(" …") or len(s) < len(shown[-1]) for s in shown[:-1])
    status = str(posts[0].result["ts"])
    assert status in [c["ts"] for c in fake_slack.calls_to("chat.delete")]  # no steps: the status goes away


async def test_a_429_in_the_middle_of_streaming_does_not_lose_the_final_text(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path, log_dir: Path
):
    fake_slack.fail("chat.appendStream", status=429, retry_after=1)  # the first append is rate limited
    bot = await live_bot(fake_slack, fake_llm, sqlite_url, slack_agents)
    try:
        fake_llm.reply(ANSWER, chunk_delay=0.04)
        await bot.deliver(mention("how is nginx?", ts="1700.000400"))
        await answered(fake_slack, "1700.000400")
    finally:
        await bot.stop()
    appends = fake_slack.calls_to("chat.appendStream")
    assert appends and not appends[0].result  # the 429 happened
    ts = str(fake_slack.calls_to("chat.startStream")[0].result["ts"])
    assert fake_slack.streams[ts] == ANSWER


async def test_a_model_error_mid_stream_leaves_one_clear_final_message(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path, log_dir: Path
):
    bot = await live_bot(fake_slack, fake_llm, sqlite_url, slack_agents, model_max_attempts=1)
    try:
        fake_llm.reply(ANSWER, chunk_delay=0.05, cut_after=8)  # the model's connection breaks mid-answer
        await bot.deliver(mention("how is nginx?", ts="1700.000500"))
        await answered(fake_slack, "1700.000500", emoji="x")
    finally:
        await bot.stop()
    ts = str(fake_slack.calls_to("chat.startStream")[0].result["ts"])
    shown = fake_slack.texts(ts)
    assert ANSWER[:20] in shown[0] or ANSWER.startswith(shown[0])  # it was streaming
    final = shown[-1]
    assert "Degraded" not in final and final.startswith("Sorry")  # the half answer is replaced, not kept
    assert len(fake_slack.posts(OPS, thread_ts="1700.000500")) == 1  # the status only: one answer message


async def test_an_assistant_thread_gets_suggested_prompts_a_title_and_its_status_line(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path, log_dir: Path
):
    bot = await live_bot(fake_slack, fake_llm, sqlite_url, slack_agents,
                         slack_suggested_prompts="Check the nginx error log; What can you do?")
    try:
        fake_slack.push(event_callback({
            "type": "assistant_thread_started", "event_ts": "1700.000600",
            "assistant_thread": {"user_id": "U_ALICE", "channel_id": "D_ALICE", "thread_ts": "1700.000600",
                                 "context": {}}}))
        await eventually(lambda: fake_slack.calls_to("assistant.threads.setSuggestedPrompts"))
        [prompts] = fake_slack.calls_to("assistant.threads.setSuggestedPrompts")
        assert [p["message"] for p in prompts["prompts"]] == ["Check the nginx error log", "What can you do?"]
        assert not fake_slack.posts()  # opening the pane posts nothing and starts no turn
        fake_llm.calls(call("tail_log", {"path": str(log_dir / "error.log"), "contains": "502"}), delay=0.3)
        fake_llm.reply(ANSWER, chunk_delay=0.02)
        await bot.deliver(message("Check the nginx error log", ts="1700.000700", channel="D_ALICE",
                                  thread_ts="1700.000600"))
        await answered(fake_slack, "1700.000700")
    finally:
        await bot.stop()
    [title] = fake_slack.calls_to("assistant.threads.setTitle")
    assert (title["channel_id"], title["thread_ts"], title["title"]) == ("D_ALICE", "1700.000600",
                                                                         "Check the nginx error log")
    statuses = [c["status"] for c in fake_slack.calls_to("assistant.threads.setStatus")]
    assert statuses[0] == "thinking…" and statuses[-1] == ""  # cleared at the end
    # the last step and what happens now (the DM's agent, `tester`, fails this call: ✗ is shown as it is)
    assert any(s.startswith("tail_log …") and "/nginx/error.log ✗ 0." in s and s.endswith(" · thinking…")
               for s in statuses)
    assert not fake_slack.posts("D_ALICE")  # no status message: the thread's own status line is used
    [start] = fake_slack.calls_to("chat.startStream")
    assert start["thread_ts"] == "1700.000600" and fake_slack.streams[str(start.result["ts"])] == ANSWER


async def test_when_slack_refuses_every_edit_the_answer_is_posted_anew_once(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path, log_dir: Path
):
    fake_slack.streaming = False
    fake_slack.fail("chat.update", error="cant_update_message", times=50)
    bot = await live_bot(fake_slack, fake_llm, sqlite_url, slack_agents)
    try:
        fake_llm.reply(ANSWER, chunk_delay=0.03)
        await bot.deliver(mention("how is nginx?", ts="1700.000800"))
        await answered(fake_slack, "1700.000800")
    finally:
        await bot.stop()
    posts = [p["text"] for p in fake_slack.posts(OPS, thread_ts="1700.000800")]
    assert posts[0] == "_thinking…_" and posts[-1].startswith("*Degraded*") and posts[-1].endswith("last hour.")
    assert len(posts) == 3  # the status, the partial answer (deleted again), the answer
    partial = str(fake_slack.posts(OPS, thread_ts="1700.000800")[1].result["ts"])
    assert partial in [c["ts"] for c in fake_slack.calls_to("chat.delete")]


async def test_a_broadcast_split_across_streamed_fragments_never_reaches_slack(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path
):
    answer = "Hey! @everyone <!channel> the upstream is down."  # "@everyone" spans two 8-character fragments
    bot = await live_bot(fake_slack, fake_llm, sqlite_url, slack_agents)
    try:
        fake_llm.reply(answer, chunk_delay=0.1)
        await bot.deliver(mention("how is nginx?", ts="1700.000900"))
        await answered(fake_slack, "1700.000900")
    finally:
        await bot.stop()
    sent = [str(v) for c in fake_slack.calls if c.method.startswith("chat.")
            for k, v in c.params.items() if k in ("text", "markdown_text")]
    assert any("upstream is down" in s for s in sent)
    assert not any("@everyone" in s or "<!channel>" in s for s in sent)
    assert not any("".join(sent[i:i + 2]).count("@everyone") for i in range(len(sent)))
