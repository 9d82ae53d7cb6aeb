"""Mattermost, what reaches the channel and what comes back after trouble: a lost WebSocket reconnected with the
posts it missed caught up over REST (answered once), live progress by editing posts, long answers split at
16,383 characters or attached, attached files read through the API with the bot token and only from the server,
and no broadcast (`@all`, `@channel`, `@here`) surviving any outgoing path."""

from __future__ import annotations

from pathlib import Path

from bot.chat.core.attachments import FileFetcher
from bot.chat.mattermost.manifest import LIMIT, PLATFORM
from bot.chat.mattermost.manifest import defuse as mm_defuse
from tests.chat.mattermost_harness import mattermost, mm_settings
from tests.chat.ops_agent import nginx_logs, shipped_ops
from tests.conftest import rows
from tests.fakes.mattermost import DM, OPS_ALERTS, TOKEN, TOWN, FakeMattermost
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import eventually

LIVE = {"model_stream": True, "progress_live": True, "progress_interval_seconds": 0.15}
PINGS = ("@all", "@channel", "@here", "@ALL", "@everyone")


def answered(fake: FakeMattermost, post: str) -> bool:
    return ("+", post, "white_check_mark") in fake.reactions or ("+", post, "x") in fake.reactions


def no_ping_in(text: str) -> bool:
    """What Mattermost would notify everyone for: `@all`/`@channel`/`@here` as a word."""
    import re

    return re.search(r"(?<![\w.+-])@(all|channel|here|everyone)\b", text, re.IGNORECASE) is None


async def test_a_lost_connection_is_reconnected_and_the_posts_it_missed_are_answered_once(
        db_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    fake = fake_mattermost
    settings = mm_settings(db_url, fake_llm, agents_dir, fake, mattermost_reconnect_max_seconds=0.5)
    async with mattermost(settings) as (app, adapter):
        fake_llm.reply("answer before")
        before = fake.mention("before the outage")
        await eventually(lambda: answered(fake, before), what="the first answer")
        fake.drop()  # the server goes away: the socket closes, reconnects are refused
        await eventually(lambda: not adapter.is_connected(), what="the adapter to notice")
        fake_llm.reply("answer missed")
        missed = fake.mention("while you were away")  # stored by the server, never pushed
        dm_missed = fake.dm("and this DM?")
        fake_llm.reply("answer dm")
        fake.resume()
        await eventually(lambda: answered(fake, missed) and answered(fake, dm_missed), timeout=15,
                         what="the missed posts answered after the reconnect")
        await eventually(adapter.is_connected, what="connected again")

        async def settled() -> list[tuple[str, str]]:
            found = [tuple(r) for r in await rows(app, "SELECT event_key, state FROM inbox")]
            return found if len(found) == 3 and all(state == "answered" for _, state in found) else []

        inbox = await eventually(settled, what="the inbox rows settled")
    assert fake.connects == 2
    assert fake.messages(TOWN, root=before) == ["answer before"]  # read again by the catch-up, not answered again
    assert sorted(fake.messages(TOWN, root=missed) + fake.messages(DM)) == ["answer dm", "answer missed"]
    assert len(fake_llm.requests) == 3
    assert sorted(inbox) == sorted([(before, "answered"), (missed, "answered"), (dm_missed, "answered")])


async def test_live_progress_edits_a_status_post_and_the_answer_as_it_is_written(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    fake = fake_mattermost
    answer = "**Degraded**: 3 upstream errors (502) since 10:00; the upstream answers again since 10:07."
    async with mattermost(mm_settings(sqlite_url, fake_llm, agents_dir, fake, progress_steps="full", **LIVE)):
        fake_llm.calls(call("echo", {"text": "checking"}), delay=0.3)
        fake_llm.reply(answer, chunk_delay=0.04)
        pid = fake.mention("check the nginx error log")
        await eventually(lambda: answered(fake, pid), what="the answer")
    status, final = fake.bot_posts(TOWN, root=pid)  # both in the thread the mention started
    steps = fake.shown(status["id"])
    assert steps[0] == "_thinking…_" and len(steps) >= 3  # edited as the turn moved
    assert "echo" in steps[-1] and "✓" in steps[-1]  # `full`: the status post stays as the steps
    shown = fake.shown(final["id"])
    assert len(shown) >= 3 and shown[-1] == answer  # grew by edits, then the whole answer in place
    assert all(answer.startswith(s.rstrip(" …")) for s in shown[:-1])
    assert fake.deleted == []


async def test_a_long_answer_is_split_at_mattermosts_limit_and_a_very_long_one_is_attached(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    fake = fake_mattermost
    long = "\n".join(f"line {i:04d}: upstream 10.0.0.7 answered 502 at 10:{i % 60:02d}" for i in range(600))
    huge = "x" * 100 + "\n" + "\n".join(f"row {i:05d} " + "y" * 60 for i in range(700))
    assert LIMIT < len(long) < 32_000 < len(huge)
    async with mattermost(mm_settings(sqlite_url, fake_llm, agents_dir, fake)):
        fake_llm.reply(long)
        first = fake.mention("show me the 502s")
        await eventually(lambda: answered(fake, first), what="the long answer")
        fake_llm.reply(huge)
        second = fake.dm("everything please")
        await eventually(lambda: answered(fake, second), what="the huge answer")
    parts = fake.messages(TOWN, root=first)
    assert len(parts) == 2 and all(len(p) <= LIMIT for p in parts) and "\n".join(parts) == long
    [preview] = fake.bot_posts(DM)
    assert "is attached as `answer.md`" in preview["message"] and len(preview["message"]) < LIMIT
    [file_id] = preview["file_ids"]
    assert fake.uploads[file_id] == ("answer.md", huge.encode())


async def test_an_answer_quoting_many_broadcasts_is_split_after_they_are_defused(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    """Split at 16,383 characters, then defused: the word joiner after each `@all` (log lines quoted) made a post
    longer than Mattermost takes, and the whole answer became an apology."""
    fake = fake_mattermost
    answer = "\n".join(f"{i:04d} @all @all @all @all deploy" for i in range(700))
    assert LIMIT < len(answer) < 32_000
    async with mattermost(mm_settings(sqlite_url, fake_llm, agents_dir, fake)):
        fake_llm.reply(answer)
        first = fake.mention("what did the log say?")
        await eventually(lambda: answered(fake, first), what="the answer")
    parts = fake.messages(TOWN, root=first)
    assert all(len(p) <= LIMIT for p in parts) and "\n".join(parts) == mm_defuse(answer)


async def test_an_attached_file_is_read_through_the_api_with_the_bot_token_and_only_from_the_server(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    fake = fake_mattermost
    async with mattermost(mm_settings(sqlite_url, fake_llm, agents_dir, fake)):
        fake_llm.reply("I read it")
        pid = fake.mention("what is in this log?", files={"error.log": b"10:00 upstream 502\n10:01 upstream 502\n"})
        await eventually(lambda: answered(fake, pid), what="the answer")
    question = str([m for m in fake_llm.requests[0]["messages"] if m["role"] == "user"][-1]["content"])
    assert "error.log" in question and "10:01 upstream 502" in question
    [download] = [r for r in fake.requests if r.path.startswith("/api/v4/files/")]
    assert download.method == "GET" and download.auth == f"Bearer {TOKEN}"
    # a reference elsewhere (a forged inbox row, a link in a message) is never fetched, and the token never sent
    fetcher = FileFetcher(PLATFORM, (fake.url,), TOKEN)
    assert fetcher.allowed(f"{fake.url}/api/v4/files/abc")
    assert not fetcher.allowed("https://evil.example/api/v4/files/abc")
    assert not fetcher.allowed(fake.url.replace("127.0.0.1", "localhost") + "/api/v4/files/abc")
    fetched = await fetcher.fetch("http://127.0.0.2:9/steal", 1000, 2.0)
    assert fetched.data is None and "not on Mattermost's file servers" in (fetched.problem or "")


async def test_no_broadcast_survives_the_final_streamed_and_status_paths_or_notify(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost, tmp_path: Path):
    fake = fake_mattermost
    shipped_ops(agents_dir, nginx_logs(tmp_path), notify_to="mattermost:#ops-alerts")
    settings = mm_settings(sqlite_url, fake_llm, agents_dir, fake, default_agent="ops", progress_steps="full",
                           **LIVE)
    loud = "Wake up @all and @channel, @here too: @ALL hands, @everyone."
    async with mattermost(settings):
        fake_llm.calls(call("notify", {"message": f"disk full {loud}"}), delay=0.2)
        fake_llm.reply(f"Done. {loud}", chunk_delay=0.02)
        pid = fake.mention("check the disk")
        await eventually(lambda: answered(fake, pid), what="the answer")
    shown = [text for post in fake.bot_posts() for text in fake.shown(post["id"])]
    assert any("Wake up" in t for t in fake.messages(OPS_ALERTS))  # notify posted (defused)
    status, final = fake.bot_posts(TOWN, root=pid)
    assert any("notify" in s for s in fake.shown(status["id"]))  # the status showed the call's arguments
    assert len(fake.shown(final["id"])) >= 2  # streamed by edits
    assert shown and all(no_ping_in(t) for t in shown), [t for t in shown if not no_ping_in(t)]
    assert all(p in mm_defuse(p).replace("\u2060", "") for p in PINGS)  # reads the same, pings nobody


async def test_an_alert_root_its_notes_and_its_edit_ping_nobody(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    fake = fake_mattermost
    async with mattermost(mm_settings(sqlite_url, fake_llm, agents_dir, fake)) as (_, adapter):
        threads = adapter.alert_threads()
        root = await threads.open("#ops-alerts", "🔴 **Alert firing:** `disk` @all @channel look", "disk")
        await threads.note(root, "still firing @here")
        await threads.edit(root, "✅ **Resolved** @ALL")
    assert (root.channel, root.thread) == (OPS_ALERTS, root.ref)  # by name; the root post is the thread
    shown = fake.shown(root.ref) + fake.messages(OPS_ALERTS, root=root.ref)
    assert len(shown) == 3 and all(no_ping_in(t) for t in shown), shown
    assert shown[0].replace("\u2060", "") == "🔴 **Alert firing:** `disk` @all @channel look"


async def test_notify_from_a_thread_of_the_target_channel_posts_into_that_thread(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    from bot.engine.messages import Scope

    fake = fake_mattermost
    async with mattermost(mm_settings(sqlite_url, fake_llm, agents_dir, fake)) as (app, adapter):
        root = await adapter.alert_threads().open("#ops-alerts", "🔴 disk full", "disk full")
        here = Scope(PLATFORM, root.channel, root.thread)
        await app.notifier.notify("mattermost:#ops-alerts", "disk 99% on web-1", here)
        await app.notifier.notify("mattermost:#ops-alerts", "another alert", Scope(PLATFORM, TOWN, "p1"))
    assert fake.messages(OPS_ALERTS, root=root.ref) == ["disk 99% on web-1"]  # a reply to the root
    assert fake.messages(OPS_ALERTS, root="") == ["🔴 disk full", "another alert"]  # from elsewhere: at the top
