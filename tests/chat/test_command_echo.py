"""What a command's text can make us do, through the real clients. `/yokebot ask` repeats its question where the
channel reads it ("@alice asked: …", Discord's thread name): a slash command's text is otherwise seen by its author
alone, so the root showed the channel what the turn itself redacted or blocked (a pasted key, a match of an
`input: block` rule). It shows the question as the agent's input guardrails leave it, on every platform; the inbox
row keeps no key either; a huge text is refused before anything is stored."""

from __future__ import annotations

from pathlib import Path

from bot.chat.mattermost.commands import COMMANDS_PATH
from tests.chat.mattermost_harness import mattermost
from tests.chat.slack_harness import ALICE, OPS
from tests.chat.test_discord_commands import bot  # noqa: F401  # the fixture
from tests.chat.test_mattermost_commands import COMMAND_TOKEN, settings
from tests.chat.test_slack_commands import slack_bot  # noqa: F401  # the fixture
from tests.conftest import rows
from tests.fakes.mattermost import TOWN, FakeMattermost
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.helpers import eventually, free_port

KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
QUESTION = f"why does {KEY} fail?"


async def test_slacks_ask_root_shows_no_secret(slack_bot, fake_slack: FakeSlack, fake_llm: FakeOpenAI):  # noqa: F811
    fake_llm.reply("ok.")
    fake_slack.push_command(fake_slack.command(f"ask {QUESTION}"))
    await eventually(lambda: any(c["text"] == "ok." for c in fake_slack.posts(OPS)), what="the answer")
    root = next(c for c in fake_slack.posts(OPS) if not c.params.get("thread_ts"))
    assert root["text"] == f"<@{ALICE}> asked: why does [REDACTED] fail?"
    assert KEY not in str([c.params for c in fake_slack.posts()])
    # nor is it kept in the inbox row, which outlives the turn until `yokebot db prune`
    [row] = await rows(slack_bot.app, "SELECT text, reply FROM inbox")
    assert row.text == "why does [REDACTED] fail?" and KEY not in row.reply and "response_url" in row.reply


async def test_discords_ask_response_and_thread_name_show_no_secret(bot, fake_discord, fake_llm: FakeOpenAI):  # noqa: F811
    fake_llm.reply("ok.")
    iid = fake_discord.command("ask", {"question": QUESTION})
    await eventually(lambda: any(p.content == "ok." for p in fake_discord.posted), what="the answer")
    root = fake_discord.originals[iid]
    assert root.content.endswith("asked: why does [REDACTED] fail?")
    assert KEY not in str(fake_discord.threads[root.id])  # the thread's name


async def test_mattermosts_ask_root_shows_no_secret(sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path,
                                                    fake_mattermost: FakeMattermost):
    fake, port = fake_mattermost, free_port()
    url = f"http://127.0.0.1:{port}{COMMANDS_PATH}"
    async with mattermost(settings(sqlite_url, fake_llm, agents_dir, fake, port), http=True):
        fake_llm.reply("ok.")
        await fake.slash(url, f"ask {QUESTION}", token=COMMAND_TOKEN)
        await eventually(lambda: "ok." in fake.messages(TOWN), what="the answer")
        assert "@alice asked: why does [REDACTED] fail?" in fake.messages(TOWN)
        assert not any(KEY in m for m in fake.messages(TOWN))


async def test_a_huge_command_is_refused_before_anything_is_stored_or_posted(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    """A Mattermost command's form may carry a megabyte: `ask` with 400 KB became a turn of 400 KB (a mention is
    at most a post, 16,383 characters), its root post refused by the server."""
    fake, port = fake_mattermost, free_port()
    url = f"http://127.0.0.1:{port}{COMMANDS_PATH}"
    async with mattermost(settings(sqlite_url, fake_llm, agents_dir, fake, port), http=True) as (app, _):
        status, body, _ = await fake.slash(url, "ask " + "a " * 200_000, token=COMMAND_TOKEN)
        assert status == 200 and body["response_type"] == "ephemeral"
        assert body["text"] == ("That is 400,004 characters; a command takes at most 16,000. For more, mention me and "
                                "attach it as a file.")
        assert await rows(app, "SELECT * FROM inbox") == [] and not fake.bot_posts(TOWN)
    assert not fake_llm.requests


async def test_discords_command_is_a_servers_install_only(bot, fake_discord):  # noqa: F811
    """Without contexts, an app a user installs on their account offers `/yokebot` in group DMs and servers the bot
    is not in; a group DM has no guild, so it read as a DM with the bot."""
    [command] = fake_discord.app_commands["global"]
    assert command["integration_types"] == [0]  # guild install only
    assert sorted(command["contexts"]) == [0, 1]  # guilds and the bot's DMs, not private channels (group DMs)
