"""Mattermost through yokebot's own client (REST v4 + the WebSocket event stream) against the fake Mattermost
on 127.0.0.1: mentions answered in their threads, DMs, follow-ups, what is ignored, attachments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import SecretStr

from bot.chat.core.pipeline import REFUSED
from bot.chat.mattermost.manifest import doctor
from tests.chat.mattermost_harness import mattermost, mm_settings
from tests.conftest import rows
from tests.fakes.mattermost import ALICE, BOB, BOT, CAROL, DM, OPS_ALERTS, OTHER_BOT, TEAM, TOWN, FakeMattermost
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import eventually


async def test_a_mention_is_answered_in_its_thread_through_the_inbox(
        db_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    fake = fake_mattermost
    async with mattermost(mm_settings(db_url, fake_llm, agents_dir, fake)) as (app, _):
        fake_llm.reply("the disk is fine")
        pid = fake.mention("how is the disk?")
        await eventually(lambda: ("+", pid, "white_check_mark") in fake.reactions, what="the answer")

        async def settled() -> list[Any]:
            found = await rows(app, 'SELECT platform, event_key, channel, thread, "user", text, trigger, state '
                                    "FROM inbox")
            return found if found and found[0].state == "answered" else []

        [row] = await eventually(settled, what="the inbox row settled")
    assert fake.messages(TOWN, root=pid) == ["the disk is fine"]  # in the thread the mention started
    assert ("+", pid, "eyes") in fake.reactions and ("-", pid, "eyes") in fake.reactions
    assert tuple(row)[:7] == ("mattermost", pid, TOWN, pid, fake.posts[pid]["user_id"], "how is the disk?", "mention")
    question = [m for m in fake_llm.requests[0]["messages"] if m["role"] == "user"][-1]["content"]
    assert "@yokebot" not in question and "how is the disk?" in question


async def test_a_mention_inside_a_thread_is_that_threads_session_and_is_answered_there(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    fake = fake_mattermost
    async with mattermost(mm_settings(sqlite_url, fake_llm, agents_dir, fake)) as (app, _):
        root = fake.say("the deploy failed")  # nobody asked the bot: ignored
        fake_llm.reply("first answer")
        ask = fake.mention("why?", root=root)
        await eventually(lambda: fake.messages(TOWN, root=root), what="the answer in the thread")
        fake_llm.reply("second answer")
        fake.say("and the rollback?", root=root)  # a follow-up in a thread the bot is in: no mention needed
        await eventually(lambda: len(fake.messages(TOWN, root=root)) == 2, what="the follow-up's answer")
        sessions = await rows(app, "SELECT channel, thread FROM sessions WHERE platform = 'mattermost'")
    assert fake.messages(TOWN, root=root) == ["first answer", "second answer"]
    assert sessions == [(TOWN, root)]  # one session: the thread
    assert len(fake_llm.requests) == 2 and ask in fake.posts


async def test_a_dm_is_answered_in_the_dm_and_the_bots_own_and_other_bots_posts_are_ignored(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    fake = fake_mattermost
    async with mattermost(mm_settings(sqlite_url, fake_llm, agents_dir, fake)) as (app, _):
        fake_llm.reply("hello alice")
        fake.say("@yokebot ping", user=OTHER_BOT)  # another bot: ignored by default
        pid = fake.dm("are you there?")
        await eventually(lambda: ("+", pid, "white_check_mark") in fake.reactions, what="the DM answer")
        kinds = await rows(app, "SELECT trigger FROM inbox")
    assert fake.messages(DM) == ["hello alice"]  # inline in the DM, not in a thread
    assert fake.bot_posts(DM)[0]["root_id"] == ""
    assert len(fake_llm.requests) == 1  # the bot's own answer (pushed back as `posted`) and the bot's: not turns
    assert kinds == [("dm",)]
    assert all(p["user_id"] == BOT for p in fake.bot_posts())


async def test_doctor_checks_the_token_and_says_what_to_fix(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    settings = mm_settings(sqlite_url, fake_llm, agents_dir, fake_mattermost)
    [works, no_buttons] = await doctor(settings)
    assert works.ok and "token works: bot yokebot" in works.detail
    assert no_buttons.warning and "YOKEBOT_MATTERMOST_ACTIONS_URL" in no_buttons.detail
    [rejected] = await doctor(settings.model_copy(update={"mattermost_bot_token": SecretStr("wrong" * 6),
                                                          "mattermost_actions_url": "http://yokebot:8080"}))
    assert not rejected.ok and "rejected MATTERMOST_BOT_TOKEN (401)" in rejected.detail and "Bot Accounts" in rejected.fix
    [away] = await doctor(settings.model_copy(update={"mattermost_url": "http://127.0.0.1:9"}))
    assert not away.ok and "cannot reach Mattermost" in away.detail
    assert await doctor(settings.model_copy(update={"mattermost_bot_token": None})) == []


async def test_access_lists_name_team_and_channel_ids_and_a_dm_author_is_looked_up_by_team(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    fake = fake_mattermost
    settings = mm_settings(sqlite_url, fake_llm, agents_dir, fake, mattermost_allowed_teams=TEAM,
                           mattermost_allowed_channels=f"{TOWN},dm")
    async with mattermost(settings):
        fake_llm.reply("hello bob")
        fake_llm.reply("hello alice")
        by_bob = fake.mention("status?", user=BOB)  # in the team's channel: allowed
        await eventually(lambda: fake.messages(TOWN, root=by_bob), what="Bob's answer")
        from_carol = fake.say("let me in", user=CAROL, channel=DM)  # a DM from someone of another team
        from_alice = fake.dm("and me?")  # a DM from a team member: her teams are looked up over REST
        await eventually(lambda: ("+", from_alice, "white_check_mark") in fake.reactions, what="Alice's answer")
        await eventually(lambda: len(fake.messages(DM)) == 2, what="Carol told")
        in_alerts = fake.mention("and here?", channel=OPS_ALERTS)  # a channel not on the list
        await eventually(lambda: fake.messages(OPS_ALERTS, root=in_alerts), what="the refusal in #ops-alerts")
    assert fake.messages(TOWN, root=by_bob) == ["hello bob"]
    assert fake.messages(DM) == [REFUSED, "hello alice"] or fake.messages(DM) == ["hello alice", REFUSED]
    assert fake.messages(OPS_ALERTS, root=in_alerts) == [REFUSED]
    assert len(fake_llm.requests) == 2 and from_carol in fake.posts  # no model call for a refused post
    assert any(r.path == f"/api/v4/users/{ALICE}/teams" for r in fake.requests)
