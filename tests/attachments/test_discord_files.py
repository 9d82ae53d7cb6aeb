"""Discord attachments: fetched from the fake CDN (no token), given to the model, stored in the inbox row."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import App
from bot.chat.discord.adapter import DiscordAdapter
from tests.chat.test_discord import start_bot
from tests.conftest import rows
from tests.fakes.discord_server import DM_CHANNEL, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import eventually


@pytest.fixture
async def discord_bot(db_url: str, fake_llm: FakeOpenAI, discord_agents: Path,
                      fake_discord: FakeDiscord) -> AsyncIterator[tuple[App, DiscordAdapter]]:
    app, adapter = await start_bot(db_url, fake_llm, discord_agents, fake_discord)
    yield app, adapter
    await adapter.stop()
    await app.close()


async def test_a_dm_with_a_log_and_a_foreign_url_reads_the_log_and_refuses_the_other(
        discord_bot: tuple[App, DiscordAdapter], fake_discord: FakeDiscord, fake_llm: FakeOpenAI):
    app, _ = discord_bot
    fake_llm.reply("Redis refused connections.")
    elsewhere = fake_llm.base_url.rsplit("/v1", 1)[0] + "/attachments/1/other.log"  # 127.0.0.1, another port
    fake_discord.dm_with_files("what is this?", [("app.log", b"ERR redis: connection refused\n", "text/plain"),
                                                ("other.log", b"never fetched\n", "text/plain")],
                               urls={"other.log": elsewhere})
    await eventually(lambda: fake_discord.reactions)
    sent = fake_llm.requests[0]["messages"][-1]["content"]
    assert "ERR redis: connection refused" in sent and "never fetched" not in sent
    assert "not on Discord's file servers" in sent
    assert fake_discord.file_gets == [("app.log", None)]  # the bot token never goes to the CDN
    posted = " ".join(p.content for p in fake_discord.posted_in(DM_CHANNEL))
    assert "Redis refused connections." in posted and 'could not read the attached file "other.log"' in posted
    stored = (await rows(app, "SELECT reply FROM inbox"))[0][0]
    stored = json.loads(stored) if isinstance(stored, str) else stored
    assert [f["name"] for f in stored["files"]] == ["app.log", "other.log"]  # a rerun after a restart has them
