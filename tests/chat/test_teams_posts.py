"""Teams beyond the answer: notify and schedules post proactively to a stored conversation reference (also after a
restart, and from a posting-only process), by `#name` or id; an unknown target is one sentence; live progress
updates the bot's own messages in place."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.app import build_app, platform_parts
from bot.chat.platforms import posting_adapters
from bot.engine.errors import ToolFailed
from tests.chat.teams_harness import teams_bot
from tests.conftest import make_settings, rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.fakes.teams import ALERTS, OPS, FakeTeams
from tests.helpers import eventually, registry, write_agent
from tests.recovery.test_teams_inbox import OPS_AGENT


async def test_notify_posts_to_a_channel_by_name_and_a_restarted_or_posting_only_process_still_can(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_teams: FakeTeams):
    write_agent(agents_dir, "tester", OPS_AGENT)
    settings = make_settings(sqlite_url, fake_llm, agents_dir, **fake_teams.settings())
    fake_llm.calls(call("notify", {"message": "disk /var is 99% full"})).reply("Alerted the team.")
    app = await build_app(settings, registry=registry())
    try:
        async with teams_bot(app) as (_, endpoint):
            mention = fake_teams.activity("check the disk and alert the team")
            assert await fake_teams.deliver(endpoint, mention) == 200
            await eventually(lambda: fake_teams.texts_in(f"{OPS};messageid={mention['id']}"), what="the answer")
        [alert] = [s for s in fake_teams.sent if s.conversation.startswith(ALERTS)]
        assert alert.text == "disk /var is 99% full" and alert.conversation == f"{ALERTS};messageid={alert.id}"
        stored = await rows(app, "SELECT conversation, name FROM conversation_refs ORDER BY conversation")
        assert [tuple(r) for r in stored] == [(ALERTS, "ops-alerts"), (OPS, None)]
    finally:
        await app.close()

    again = await build_app(settings, registry=registry())  # restarted: nothing in memory, the table remembers
    try:
        async with teams_bot(again) as (adapter, _):
            ref = await adapter.post(OPS, "the nightly report")  # by id
            assert ref.startswith(f"teams:{OPS};messageid=")
            with pytest.raises(ToolFailed, match="no conversation reference for it yet"):
                await adapter.post("19:never-seen@thread.tacv2", "hello")
        [outbox] = posting_adapters(platform_parts(again))  # `yokebot schedule run`: posting only
        try:
            await outbox.post("#ops-alerts", "a scheduled report")
        finally:
            await outbox.stop()
    finally:
        await again.close()
    assert [s.text for s in fake_teams.sent if s.conversation.startswith(OPS) and "nightly" in s.text] \
        == ["the nightly report"]
    assert [s.text for s in fake_teams.sent if s.conversation.startswith(ALERTS)][-1] == "a scheduled report"


async def test_live_progress_updates_the_bot_s_own_messages_in_place(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_teams: FakeTeams):
    write_agent(agents_dir, "tester", "tools: [current_time]\nmax_iterations: 4")
    fake_llm.calls(call("current_time", {}), delay=0.4).reply("It is late.", delay=0.4)
    app = await build_app(make_settings(sqlite_url, fake_llm, agents_dir, progress_live=True,
                                        progress_interval_seconds=0.05, **fake_teams.settings()),
                          registry=registry())
    try:
        async with teams_bot(app) as (_, endpoint):
            mention = fake_teams.activity("what time is it?")
            chain = f"{OPS};messageid={mention['id']}"
            assert await fake_teams.deliver(endpoint, mention) == 200
            await eventually(lambda: "It is late." in fake_teams.texts_in(chain), what="the answer")
        [status, *_] = [s for s in fake_teams.sent if s.conversation == chain and s.activity["type"] == "message"]
        changed = [u for u in fake_teams.updates if u.id == status.id and u.conversation == chain]
        assert status.text != "It is late." and changed  # the status message, then updated in place
        assert "current_time" in changed[-1].text  # it ends as the list of steps
    finally:
        await app.close()


async def test_notify_from_a_thread_of_the_target_channel_posts_into_its_reply_chain(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_teams: FakeTeams):
    """An alert's investigation runs in its root's reply chain; its notify to the root's channel is a reply there,
    not a new post in the channel. From anywhere else, a new post as before."""
    from bot.engine.messages import Scope

    write_agent(agents_dir, "tester", OPS_AGENT)
    fake_llm.reply("hello")
    app = await build_app(make_settings(sqlite_url, fake_llm, agents_dir, **fake_teams.settings()),
                          registry=registry())
    try:
        async with teams_bot(app) as (adapter, endpoint):
            assert await fake_teams.deliver(endpoint, fake_teams.activity("hello")) == 200  # its references stored
            await eventually(lambda: fake_llm.requests, what="the first answer")
            root = await adapter.alert_threads().open("#ops-alerts", "🔴 disk full", "disk full")
            await app.notifier.notify("teams:#ops-alerts", "disk 99% on web-1", Scope("teams", root.channel, root.thread))
            await app.notifier.notify("teams:#ops-alerts", "another alert", Scope("teams", OPS, "elsewhere"))
    finally:
        await app.close()
    chain = f"{ALERTS};messageid={root.ref}"
    assert fake_teams.texts_in(chain) == ["🔴 disk full", "disk 99% on web-1"]
    [other] = [s for s in fake_teams.sent if s.text == "another alert"]
    assert other.conversation == f"{ALERTS};messageid={other.id}"  # a new post of its own
