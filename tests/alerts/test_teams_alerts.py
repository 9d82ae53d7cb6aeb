"""Alert webhooks in `yokebot run` with Teams: `post_to: teams:#ops-alerts` resolved through the conversation
reference stored when the bot was first spoken to in that team (the channel found in the connector's list of the
team's channels), the root a new post in the channel, the investigation answered in its reply chain, the root
updated when the group resolves; /readyz reports Teams."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from tests.alerts.harness import TOKEN, Served, hook, ops_agent, payload, processed, up
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.teams import ALERTS, FakeTeams
from tests.helpers import eventually, free_port


async def test_an_alert_group_on_teams_gets_a_post_an_investigation_in_its_chain_and_a_resolved_root(
        sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_teams: FakeTeams):
    agents = tmp_path / "agents"
    ops_agent(agents, post_to="teams:#ops-alerts")
    settings = make_settings(sqlite_url, fake_llm, agents, default_agent="ops", http_port=free_port(),
                             http_host="127.0.0.1", scheduler_enabled=False, webhook_token=TOKEN,
                             **fake_teams.settings())
    served = Served(settings)
    base = f"http://127.0.0.1:{settings.http_port}"
    try:
        await up(settings)
        async with aiohttp.ClientSession() as http, http.get(f"{base}/readyz") as resp:
            ready = await resp.json()
        assert resp.status == 200 and ready["adapters"] == {"teams": "connected"}, ready
        fake_llm.reply("hello")  # the bot is spoken to once in the team: its reference is stored
        assert await fake_teams.deliver(f"{base}/teams/messages", fake_teams.activity("hello")) == 200
        await eventually(lambda: len(fake_llm.requests) == 1, what="the first answer")
        fake_llm.reply("api-1 was deployed at 21:00 and answers 5xx since; roll it back.")
        assert (await hook(settings, "/hooks/alertmanager", payload("alertmanager_firing")))[0] == 200
        root = (await eventually(lambda: [s for s in fake_teams.sent if s.conversation.startswith(ALERTS)],
                                 what="the root post"))[0]
        await eventually(lambda: fake_teams.texts_in(root.conversation)[1:], what="the investigation in the chain")
        assert (await hook(settings, "/hooks/alertmanager", payload("alertmanager_resolved")))[0] == 200
        await processed(sqlite_url, 2)
        await eventually(lambda: [u for u in fake_teams.updates if u.id == root.id], what="the root resolved")
        async with aiohttp.ClientSession() as http, http.get(f"{base}/metrics") as resp:
            metrics = await resp.text()
        assert 'yokebot_adapter_events_total{kind="mention",platform="teams"} 1.0' in metrics
    finally:
        await served.stop()
    assert root.conversation == f"{ALERTS};messageid={root.id}"
    assert root.text.startswith("🔴 **Alert firing:** `HighErrorRate` · severity `critical`")
    chain = fake_teams.texts_in(root.conversation)
    assert chain[1] == "api-1 was deployed at 21:00 and answers 5xx since; roll it back."
    assert any(t.startswith("✅ Resolved at ") for t in chain[2:])
    [edit] = [u for u in fake_teams.updates if u.id == root.id]
    assert edit.text.startswith("✅ **Resolved at ")
