"""Alert webhooks in `yokebot run` with Discord: the root in the channel, a thread opened on it (the session's
thread, as for a mention), the investigation answered there, the root edited when the group resolves, and a
human's message in the thread continuing the same session."""

from __future__ import annotations

from pathlib import Path

from tests.alerts.harness import TOKEN, Served, hook, ops_agent, payload, processed, up
from tests.conftest import make_settings
from tests.fakes.discord_server import OPS_ALERTS, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import db_rows, eventually, free_port

DISCORD_TOKEN = "discord-alerts-token-0123456789"


async def test_an_alert_group_on_discord_gets_a_thread_an_investigation_and_a_resolved_root(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_discord: FakeDiscord
):
    agents = tmp_path / "agents"
    ops_agent(agents, post_to=f"discord:{OPS_ALERTS}")
    settings = make_settings(sqlite_url, fake_llm, agents, default_agent="ops", http_port=free_port(),
                             http_host="127.0.0.1", scheduler_enabled=False, webhook_token=TOKEN,
                             discord_bot_token=DISCORD_TOKEN, discord_api_url=fake_discord.api_url,
                             discord_gateway_url=fake_discord.gateway_url, discord_guild_ready_timeout=0.05)
    fake_llm.reply("api-1 was deployed at 21:00 and answers 5xx since; roll it back.")
    served = Served(settings)
    try:
        await up(settings)
        assert (await hook(settings, "/hooks/alertmanager", payload("alertmanager_firing")))[0] == 200
        [root] = await eventually(lambda: fake_discord.posted_in(OPS_ALERTS), what="the root message")
        await eventually(lambda: fake_discord.posted_in(root.id), what="the investigation in the thread")
        assert (await hook(settings, "/hooks/alertmanager", payload("alertmanager_firing")))[0] == 200
        assert (await hook(settings, "/hooks/alertmanager", payload("alertmanager_resolved")))[0] == 200
        await processed(sqlite_url, 3)
        fake_llm.reply("It was rolled back at 21:25.")
        fake_discord.send_message(root.id, "was it rolled back?")  # in the thread (its ID is the root's)
        await eventually(lambda: len(fake_discord.posted_in(root.id)) == 3, what="the follow-up")
    finally:
        await served.stop()

    assert root.content.startswith("🔴 **Alert firing:** `HighErrorRate` · severity `critical`")
    assert fake_discord.threads[root.id]["name"] == "Alert: HighErrorRate"
    thread = [p.content for p in fake_discord.posted_in(root.id)]
    assert thread[0] == "api-1 was deployed at 21:00 and answers 5xx since; roll it back."
    assert thread[1].startswith("✅ Resolved at ") and thread[2] == "It was rolled back at 21:25."
    [edit] = [e for e in fake_discord.edits if e[1] == root.id]
    assert edit[2].startswith("✅ **Resolved at ") and len(fake_discord.posted_in(OPS_ALERTS)) == 1
    turns = await db_rows(sqlite_url, "SELECT t.trigger, s.id AS session, s.channel, s.thread FROM turns t "
                                      "JOIN sessions s ON s.id = t.session_id ORDER BY t.started_at")
    assert [t.trigger for t in turns] == ["alert", "thread"] and turns[0].session == turns[1].session
    assert (turns[0].channel, turns[0].thread) == (str(OPS_ALERTS), str(root.id))


async def test_bodies_recorded_from_alertmanager_0_25_open_and_resolve_a_thread_on_discord(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_discord: FakeDiscord
):
    agents = tmp_path / "agents"
    ops_agent(agents, post_to=f"discord:{OPS_ALERTS}")
    settings = make_settings(sqlite_url, fake_llm, agents, default_agent="ops", http_port=free_port(),
                             http_host="127.0.0.1", scheduler_enabled=False, webhook_token=TOKEN,
                             discord_bot_token=DISCORD_TOKEN, discord_api_url=fake_discord.api_url,
                             discord_gateway_url=fake_discord.gateway_url, discord_guild_ready_timeout=0.05)
    fake_llm.reply("checkout is down on 127.0.0.1:39555.")
    served = Served(settings)
    try:
        await up(settings)
        assert (await hook(settings, "/hooks/alertmanager", payload("recorded_alertmanager_0.25_firing")))[0] == 200
        [root] = await eventually(lambda: fake_discord.posted_in(OPS_ALERTS), what="the root message")
        await eventually(lambda: fake_discord.posted_in(root.id), what="the investigation")
        assert (await hook(settings, "/hooks/alertmanager", payload("recorded_alertmanager_0.25_resolved")))[0] == 200
        await processed(sqlite_url, 2)
    finally:
        await served.stop()
    assert root.content.startswith("🔴 **Alert firing:** `AppBroken` · severity `critical`")
    assert "Summary: `checkout is broken on 127.0.0.1:39555`" in root.content
    assert "[source](http://vm:46229/graph?g0.expr=app_broken+%3E+0&g0.tab=1)" in root.content
    assert fake_discord.posted_in(root.id)[0].content == "checkout is down on 127.0.0.1:39555."
    # Alertmanager 0.25's endsAt (22:37:59.173Z), not the time the webhook arrived
    assert next(e[2] for e in fake_discord.edits if e[1] == root.id).startswith(
        "✅ **Resolved at 2026-12-01 22:37:59 UTC:**")
