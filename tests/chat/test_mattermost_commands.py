"""`/yokebot <sub>` on Mattermost: the custom slash command's POST (a form with the command's token) to yokebot's
/mattermost/commands on a real aiohttp server, answered through the command's response_url at the fake
Mattermost. docs/commands.md."""

from __future__ import annotations

from pathlib import Path

from bot.chat.core.pipeline import REFUSED
from bot.chat.mattermost.commands import COMMANDS_PATH
from tests.chat.mattermost_harness import mattermost, mm_settings
from tests.conftest import rows
from tests.fakes.mattermost import ALICE, BOT, CAROL, DM, TOKEN, TOWN, FakeMattermost
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import eventually, free_port, write_agent

COMMAND_TOKEN = "slashcommandtoken0123456789"


def settings(db: str, llm: FakeOpenAI, agents: Path, fake: FakeMattermost, port: int, **extra: object):
    return mm_settings(db, llm, agents, fake, mattermost_actions_url=f"http://127.0.0.1:{port}",
                       mattermost_command_token=COMMAND_TOKEN, **extra)


async def test_ask_posts_a_root_and_answers_in_its_thread_and_status_answers_the_caller_only(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    fake, port = fake_mattermost, free_port()
    url = f"http://127.0.0.1:{port}{COMMANDS_PATH}"
    async with mattermost(settings(sqlite_url, fake_llm, agents_dir, fake, port), http=True) as (app, _):
        fake_llm.reply("the disk is fine")
        status, body, trigger = await fake.slash(url, "ask how is the disk?", token=COMMAND_TOKEN)
        assert status == 200 and body == {"response_type": "ephemeral", "text": ""}  # nothing shown: the post says it
        await eventually(lambda: "the disk is fine" in fake.messages(TOWN), what="the answer")
        root = next(p for p in fake.order if fake.posts[p]["message"] == "@alice asked: how is the disk?")
        assert fake.posts[root]["user_id"] == BOT and fake.posts[root]["root_id"] == ""
        assert fake.messages(TOWN, root=root) == ["the disk is fine"]
        await eventually(lambda: ("+", root, "white_check_mark") in fake.reactions, what="✅")

        status, body, second = await fake.slash(url, "status", token=COMMAND_TOKEN)
        await eventually(lambda: fake.answered_privately(second), what="the status")
        [said] = fake.answered_privately(second)
        assert "yokebot is up" in said and "agent `tester`" in said
        assert all(auth == "" for _, _, auth in fake.command_answers)  # no bot token sent to the hook

        turns = await rows(app, 'SELECT t.trigger, t.text, s.thread FROM turns t JOIN sessions s '
                                'ON s.id = t.session_id ORDER BY t.started_at')
        assert [(t.trigger, t.text, t.thread) for t in turns] == [
            ("command", "how is the disk?", root), ("command", "/yokebot status", "/yokebot")]
        assert sorted(r.event_key for r in await rows(app, "SELECT event_key FROM inbox")) == sorted([trigger, second])
    assert len(fake_llm.requests) == 1  # status never reached the model


async def test_a_wrong_token_is_refused_unstored_bad_input_is_answered_and_access_refuses_like_a_mention(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    fake, port = fake_mattermost, free_port()
    url = f"http://127.0.0.1:{port}{COMMANDS_PATH}"
    write_agent(agents_dir, "tester", f"description: t\naccess:\n  users: ['{ALICE}']")
    async with mattermost(settings(sqlite_url, fake_llm, agents_dir, fake, port), http=True) as (app, _):
        status, body, _ = await fake.slash(url, "status", token=TOKEN)  # the bot's token is not the command's
        assert status == 401 and "token" in body["text"]
        assert await rows(app, "SELECT * FROM inbox") == []

        status, body, _ = await fake.slash(url, "frobnicate", token=COMMAND_TOKEN)
        assert status == 200 and body["response_type"] == "ephemeral"
        assert "I don't know the command `frobnicate`" in body["text"]
        assert await rows(app, "SELECT * FROM inbox") == []

        status, _, trigger = await fake.slash(url, "ask restart prod", user=CAROL, token=COMMAND_TOKEN)
        await eventually(lambda: fake.answered_privately(trigger), what="the refusal")
        assert fake.answered_privately(trigger) == [REFUSED]
        assert not fake_llm.requests and not fake.bot_posts(TOWN)

        status, _, trigger = await fake.slash(url, "reset", channel=DM, token=COMMAND_TOKEN)
        await eventually(lambda: fake.answered_privately(trigger), what="the reset")
        assert fake.answered_privately(trigger)[0].startswith("Done: I have forgotten")
        sessions = await rows(app, "SELECT channel, thread FROM sessions")
        assert [(s.channel, s.thread) for s in sessions] == [(DM, DM)]  # the DM's own conversation
