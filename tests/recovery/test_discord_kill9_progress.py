"""`yokebot run` killed with SIGKILL while Discord turns show their live progress, then started again: each
message is answered after the restart, and the thread or DM keeps nothing of the dead process that looks
alive. Before, its status message said "_thinking…_" forever above the answer, and a half-written answer
stayed next to the whole one. Now the status message says the bot was restarted (Slack's note) and the half
answer is deleted, over REST, before the message is answered again. On SQLite (the restarted process takes
everything over at once) and PostgreSQL (the lease runs out)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.app import build_app
from bot.chat.discord.output import DiscordReply
from bot.records.inbox import InboxItem
from tests.fakes.discord_server import ALICE, DM_CHANNEL, GENERAL, GUILD_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import build_discord, db_rows, registry
from tests.recovery.harness import HALF, THINKS, WRITES, Bot, MidTurnModel, wait_until
from tests.recovery.test_discord_inbox import discord_env, discord_settings
from tests.recovery.test_instances import readyz

RESTARTED = "_I was restarted while working on this; see below_"

def shown_in(fake: FakeDiscord, channel: int) -> list[str]:
    """What a reader sees in a channel, thread or DM now: the bot's messages not deleted, as last edited."""
    return [fake.shown(p.id)[-1] for p in fake.posted_in(channel) if (p.channel, p.id) not in fake.deleted]


def test_after_a_kill9_discord_keeps_no_thinking_status_and_no_half_answer(
        tmp_path: Path, db_url: str, fake_discord: FakeDiscord, fake_llm: FakeOpenAI):
    model = MidTurnModel()
    fake_llm.handler = model
    env = {**discord_env(tmp_path, db_url, fake_discord, fake_llm), "YOKEBOT_PROGRESS_LIVE": "true",
           "YOKEBOT_MODEL_STREAM": "true", "YOKEBOT_PROGRESS_INTERVAL_SECONDS": "0.1"}
    first = Bot(env, tmp_path, "first")
    try:
        wait_until(lambda: readyz(env["YOKEBOT_HTTP_PORT"]) == 200, 30, "the gateway", first)
        thinks = fake_discord.mention(THINKS)  # answered in the thread opened on it (the thread has its ID)
        writes = fake_discord.dm(WRITES)
        wait_until(lambda: len(fake_discord.posted_in(DM_CHANNEL)) == 2, 20, "the half-written answer", first)
        # the messages of both turns are noted on their inbox rows (queued with the turn's rows: milliseconds)
        noted = "SELECT count(status_ref), count(answer_ref) FROM inbox"
        wait_until(lambda: asyncio.run(db_rows(db_url, noted)) == [(2, 1)], 10, "the noted messages", first)
    finally:
        first.kill9()
    assert shown_in(fake_discord, thinks) == ["_thinking…_"]
    [status, half] = shown_in(fake_discord, DM_CHANNEL)
    assert status.startswith("_writing the answer") and HALF.startswith(half)

    model.fast = True
    second = Bot(env, tmp_path, "second")
    try:
        def answered() -> bool:
            return sorted(fake_discord.reactions) == sorted([(GENERAL, thinks, "✅"), (DM_CHANNEL, writes, "✅")])

        wait_until(answered, 30, "both answers after the restart", second)
        asyncio.run(asyncio.sleep(0.5))  # nothing else comes
    finally:
        assert second.stop() == 0, second.output()[-3000:]
    # the dead process's status message says what happened; its half answer is gone; the answer follows, once
    assert shown_in(fake_discord, thinks) == [RESTARTED, f"answer: {THINKS}"]
    assert shown_in(fake_discord, DM_CHANNEL) == [RESTARTED, f"answer: {WRITES}"]
    assert sorted(fake_discord.threads) == [thinks]  # the rerun answered in the thread the first run opened


async def test_a_status_message_deleted_meanwhile_does_not_keep_the_half_answer(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_discord: FakeDiscord):
    """Someone deleted the dead process's status message before the restart: Discord answers 404, and the half
    answer is deleted all the same, from the reply rebuilt out of the inbox row (REST only, no gateway)."""
    app = await build_app(discord_settings(sqlite_url, fake_llm, agents_dir, fake_discord), registry=registry())
    adapter = build_discord(app)
    assert adapter is not None
    question, status, half = fake_discord.new_id(), fake_discord.new_id(), fake_discord.new_id()
    fake_discord.gone.add(status)
    item = InboxItem(id=1, platform="discord", event_key=str(question), channel=str(GENERAL), thread=str(question),
                     text=THINKS, trigger="mention", user=str(ALICE), state="running",
                     reply={"message": str(question), "channel": str(GENERAL), "guild": str(GUILD_ID), "roles": []},
                     live={"status": f"{question}/{status}", "answer": f"{question}/{half}"})
    try:
        await adapter.identify()  # as recovery does, before the gateway is up
        reply = adapter.rebuild(item).reply
        assert isinstance(reply, DiscordReply)
        await reply.leftovers(item.live)
    finally:
        await adapter.stop()
        await app.close()
    assert ("PATCH", f"/channels/{question}/messages/{status}") in [(m, p) for m, p, _ in fake_discord.requests]
    assert fake_discord.deleted == [(question, half)] and fake_discord.edits == []
