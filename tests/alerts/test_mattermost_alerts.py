"""`yokebot run` with Mattermost: an alert group's root posted in `mattermost:#ops-alerts` (by name), the
investigation answered in its thread (the root post is the session's thread, as for a mention), the root edited
when the group resolves, a human's reply in the thread continuing the session; `notify` to Mattermost from a DM;
`/readyz` reporting the connection and `/metrics` counting by platform."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from tests.alerts.harness import TOKEN, Served, hook, ops_agent, payload, processed, up
from tests.chat.mattermost_harness import mm_settings
from tests.fakes.mattermost import DM, OPS_ALERTS, FakeMattermost
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import db_rows, eventually, free_port, write_agent


async def test_an_alert_group_on_mattermost_gets_a_root_a_thread_an_investigation_and_a_resolved_root(
        sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_mattermost: FakeMattermost):
    fake = fake_mattermost
    agents = tmp_path / "agents"
    ops_agent(agents, post_to="mattermost:#ops-alerts")
    settings = mm_settings(sqlite_url, fake_llm, agents, fake, default_agent="ops", http_port=free_port(),
                           http_host="127.0.0.1", scheduler_enabled=False, webhook_token=TOKEN)
    fake_llm.reply("api-1 was deployed at 21:00 and answers 5xx since; roll it back.")
    served = Served(settings)
    try:
        await up(settings)
        assert (await hook(settings, "/hooks/alertmanager", payload("alertmanager_firing")))[0] == 200
        [root] = await eventually(lambda: fake.bot_posts(OPS_ALERTS, root=""), what="the root post")
        await eventually(lambda: fake.messages(OPS_ALERTS, root=root["id"]), what="the investigation in its thread")
        assert (await hook(settings, "/hooks/alertmanager", payload("alertmanager_resolved")))[0] == 200
        await processed(sqlite_url, 2)
        fake_llm.reply("It was rolled back at 21:25.")
        fake.say("was it rolled back?", channel=OPS_ALERTS, root=root["id"])  # no mention: the bot's thread
        await eventually(lambda: len(fake.messages(OPS_ALERTS, root=root["id"])) == 3, what="the follow-up")
    finally:
        await served.stop()
    assert fake.shown(root["id"])[0].startswith("🔴 **Alert firing:** `HighErrorRate` · severity `critical`")
    assert fake.posts[root["id"]]["message"].startswith("✅ **Resolved at ")  # the root edited in place
    thread = fake.messages(OPS_ALERTS, root=root["id"])
    assert thread[0] == "api-1 was deployed at 21:00 and answers 5xx since; roll it back."
    assert thread[1].startswith("✅ Resolved at ") and thread[2] == "It was rolled back at 21:25."
    assert len(fake.bot_posts(OPS_ALERTS, root="")) == 1
    turns = await db_rows(sqlite_url, "SELECT t.trigger, s.id AS session, s.channel, s.thread FROM turns t "
                                      "JOIN sessions s ON s.id = t.session_id ORDER BY t.started_at")
    assert [t.trigger for t in turns] == ["alert", "thread"] and turns[0].session == turns[1].session
    assert (turns[0].channel, turns[0].thread) == (OPS_ALERTS, root["id"])


async def test_yokebot_run_notifies_mattermost_reports_it_ready_and_counts_its_events(
        sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_mattermost: FakeMattermost):
    fake = fake_mattermost
    agents = tmp_path / "agents"
    write_agent(agents, "ops", 'description: on call\ntools: [current_time, notify]\nnotify:\n'
                               '  default: "mattermost:#ops-alerts"\n  allowed: ["mattermost:#ops-alerts"]')
    settings = mm_settings(sqlite_url, fake_llm, agents, fake, default_agent="ops", http_port=free_port(),
                           http_host="127.0.0.1", scheduler_enabled=False)
    fake_llm.calls(call("notify", {"message": "disk /var is 99% full on web-1"}))
    fake_llm.reply("I told the team.")
    served = Served(settings)
    base = f"http://127.0.0.1:{settings.http_port}"
    try:
        await up(settings)

        async def readyz() -> tuple[int, dict[str, Any]] | None:
            async with aiohttp.ClientSession() as http, http.get(f"{base}/readyz") as resp:
                found = (resp.status, await resp.json())
            return found if found[0] == 200 else None

        ready = await eventually(readyz, what="ready")
        fake.dm("check the disk and tell the team")
        await eventually(lambda: fake.messages(DM) == ["I told the team."], what="the answer")
        async with aiohttp.ClientSession() as http, http.get(f"{base}/metrics") as resp:
            metrics = await resp.text()
    finally:
        await served.stop()
    assert ready[0] == 200 and ready[1]["adapters"] == {"mattermost": "connected"}
    assert fake.messages(OPS_ALERTS) == ["disk /var is 99% full on web-1"]
    assert 'platform="mattermost"' in metrics and 'kind="dm"' in metrics
