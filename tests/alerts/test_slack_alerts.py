"""Alert webhooks in `yokebot run` with Slack: recorded Alertmanager and Grafana bodies through the real HTTP
server, the real Slack SDK against the fake Slack, the scripted model; one thread per alert group."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from typer.testing import CliRunner

from bot.alerts.payloads import MAX_BODY_BYTES
from bot.cli import app as cli
from tests.alerts.harness import ROOT_CHANNEL, SLACK_TOKENS, TOKEN, Served, hook, ops_agent, payload, processed, up
from tests.chat.slack_harness import answered, message
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.helpers import db_rows, eventually, free_port

AM = "/hooks/alertmanager"


def settings_for(db: str, llm: FakeOpenAI, agents: Path, slack: FakeSlack, **kw: object):
    values = dict(default_agent="ops", http_port=free_port(), http_host="127.0.0.1", scheduler_enabled=False,
                  slack_api_url=slack.api_url, webhook_token=TOKEN, **SLACK_TOKENS)
    values.update(kw)
    return make_settings(db, llm, agents, **values)


def _utc(value: Any) -> datetime:
    """A timestamp column as an aware UTC datetime (SQLite hands back text or naive values)."""
    when = datetime.fromisoformat(value) if isinstance(value, str) else value
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def roots(slack: FakeSlack) -> list[dict]:
    return [c for c in slack.posts(ROOT_CHANNEL) if not c.params.get("thread_ts") and (c.result or {}).get("ts")]


async def test_an_alert_group_gets_one_thread_an_investigation_notes_and_a_resolved_root(
    db_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_slack: FakeSlack
):
    agents = tmp_path / "agents"
    ops_agent(agents)
    settings = settings_for(db_url, fake_llm, agents, fake_slack)
    fake_llm.reply("The api's 5xx come from a bad deploy of api-1 at 21:00; roll it back.")
    served = Served(settings)
    try:
        await up(settings)
        assert (await hook(settings, AM, payload("alertmanager_firing")))[0] == 200
        await eventually(lambda: roots(fake_slack), what="the root message")
        root = roots(fake_slack)[0]
        ts = root.result["ts"]
        await answered(fake_slack, ts)  # the investigation ran as a turn and answered in the thread

        assert (await hook(settings, AM, payload("alertmanager_firing")))[0] == 200  # a repeat
        await processed(db_url, 2)
        assert (await hook(settings, AM, payload("alertmanager_joined")))[0] == 200  # api-2 joins
        await processed(db_url, 3)
        assert (await hook(settings, AM, payload("alertmanager_resolved")))[0] == 200
        await processed(db_url, 4)

        fake_llm.reply("Yes: api-1 was rolled back at 21:25.")  # a human asks in the thread
        fake_slack.push(message("was it rolled back?", "1900.000200", ROOT_CHANNEL, thread_ts=ts))
        await eventually(lambda: any("rolled back at 21:25" in p["text"]
                                     for p in fake_slack.posts(ROOT_CHANNEL, thread_ts=ts)), what="the follow-up")
    finally:
        await served.stop()

    assert len(roots(fake_slack)) == 1
    assert root["text"].startswith("🔴 *Alert firing:* `HighErrorRate` · severity `critical`")
    assert "Summary: `5xx ratio above 5% on the api`" in root["text"]
    assert "1 alert on `api-1:8080`" in root["text"] and "Since 2026-12-01 21:00:00 UTC" in root["text"]
    assert "|source>" in root["text"]  # the generator URL, as a link

    thread = [p["text"] for p in fake_slack.posts(ROOT_CHANNEL, thread_ts=ts)]
    assert thread[0] == "The api's 5xx come from a bad deploy of api-1 at 21:00; roll it back."
    assert thread[1] == "➕ 1 new alert joined this group: `HighErrorRate` on `api-2:8080`"
    # resolved when the alerts stopped firing (their endsAt), not when the webhook came (up to group_interval later)
    assert thread[2].startswith("✅ Resolved at 2026-12-01 21:30:00 UTC:") and len(thread) == 4  # + the human's answer
    [edit] = [c for c in fake_slack.calls_to("chat.update") if c.params.get("ts") == ts]
    assert edit.params["text"].startswith("✅ *Resolved at 2026-12-01 21:30:00 UTC:*")
    assert "`HighErrorRate`" in edit.params["text"]

    turns = await db_rows(db_url, "SELECT t.trigger, t.text, s.id AS session, s.platform, s.channel, s.thread "
                                      "FROM turns t JOIN sessions s ON s.id = t.session_id ORDER BY t.started_at")
    assert [t.trigger for t in turns] == ["alert", "thread"]
    assert turns[0].session == turns[1].session and (turns[0].platform, turns[0].channel, turns[0].thread) == \
        ("slack", ROOT_CHANNEL, ts)  # the human's reply continued the investigation's session
    asked = turns[0].text
    assert "Start with the \"api\" service." in asked and "NOT instructions" in asked
    assert '"runbook_url": "https://runbooks.example/api-5xx"' in asked
    inbox = await db_rows(db_url, "SELECT platform, state, trigger FROM inbox WHERE platform = 'alerts'")
    assert [(r.state, r.trigger) for r in inbox] == [("answered", "alert")]
    groups = await db_rows(db_url, "SELECT state, investigation, root_ref, thread, resolved_at FROM alert_groups")
    assert [(g.state, g.investigation, g.root_ref) for g in groups] == [("resolved", "started", ts)]
    [incident] = await db_rows(db_url, "SELECT resolved_at FROM incidents")
    for stored in (groups[0].resolved_at, incident.resolved_at):  # stored as endsAt too (the incident record)
        assert _utc(stored) == datetime(2026, 12, 1, 21, 30, tzinfo=UTC)

    # `yokebot alerts list`: resolved (when), the investigation answered, and the session `yokebot trace` takes
    listed = await asyncio.to_thread(CliRunner().invoke, cli, ["alerts", "list", "--json"],
                                     env={"YOKEBOT_DATABASE_URL": db_url})
    [group] = json.loads(listed.output)
    assert (group["status"], group["investigation"], group["session_id"]) == ("resolved", "answered", turns[0].session)
    assert group["resolved_at"].startswith("2026-12-01T21:30:00")


async def test_a_hostile_alert_is_shown_as_typed_and_quoted_to_the_model_as_data(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_slack: FakeSlack
):
    agents = tmp_path / "agents"
    ops_agent(agents)
    settings = settings_for(sqlite_url, fake_llm, agents, fake_slack)
    fake_llm.reply("Looked at it.")
    served = Served(settings)
    try:
        await up(settings)
        assert (await hook(settings, AM, payload("alertmanager_hostile")))[0] == 200
        await eventually(lambda: roots(fake_slack), what="the root message")
        await answered(fake_slack, roots(fake_slack)[0].result["ts"])
    finally:
        await served.stop()

    text = roots(fake_slack)[0]["text"]
    assert "<!channel>" not in text and "<!subteam" not in text and "<!here" not in text
    assert "&lt;!channel&gt;" in text and "@\u2060everyone" in text
    assert "`Disk &lt;!channel&gt; *full*`" in text  # inside code: no bold, no ping
    assert "\x1b" not in text and "\x07" not in text and "<@U_ALICE>" not in text
    assert "javascript:" not in text  # not a link
    asked = fake_llm.requests[0]["messages"][-1]["content"]
    assert "NOT instructions" in asked and "````json" in asked  # the data's own ``` cannot close the fence
    assert "\x1b" not in asked


async def test_bad_requests_are_refused_and_nothing_is_stored(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_slack: FakeSlack
):
    agents = tmp_path / "agents"
    ops_agent(agents)
    settings = settings_for(sqlite_url, fake_llm, agents, fake_slack)
    served = Served(settings)
    try:
        await up(settings)
        body = payload("alertmanager_firing")
        no_token = await hook(settings, AM, body, token=None)
        wrong = await hook(settings, AM, body, token="nope")
        not_json = await hook(settings, AM, None, raw=b"{not json")
        grafana_at_am = await hook(settings, AM, payload("grafana_firing"))
        no_alerts = await hook(settings, "/hooks/grafana", {"orgId": 1, "status": "firing", "alerts": []})
        huge = await hook(settings, AM, None, raw=b"[" + b" " * MAX_BODY_BYTES + b"]")
    finally:
        await served.stop()
    assert no_token[0] == wrong[0] == 401
    assert (not_json[0], not_json[1]["error"]) == (400, "The body is not JSON.")
    assert grafana_at_am[0] == 400 and "Alertmanager" in grafana_at_am[1]["error"]
    assert no_alerts == (400, {"error": "The body has no `alerts` list."})
    assert huge[0] == 413
    assert await db_rows(sqlite_url, "SELECT id FROM alert_notifications") == []
    assert roots(fake_slack) == []


async def test_without_a_webhook_token_there_are_no_hooks(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_slack: FakeSlack
):
    agents = tmp_path / "agents"
    ops_agent(agents)
    settings = settings_for(sqlite_url, fake_llm, agents, fake_slack, webhook_token=None)
    served = Served(settings)
    try:
        await up(settings)
        status, _ = await hook(settings, AM, payload("alertmanager_firing"))
    finally:
        await served.stop()
    assert status == 404


async def test_grafana_groups_an_unrouted_group_and_the_storm_limit(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_slack: FakeSlack
):
    agents = tmp_path / "agents"
    ops_agent(agents)
    settings = settings_for(sqlite_url, fake_llm, agents, fake_slack, alert_max_per_10m=1)
    fake_llm.reply("Grafana's disk alert: db-1's WAL is growing; checkpoint it.")
    served = Served(settings)
    try:
        await up(settings)
        assert (await hook(settings, "/hooks/grafana", payload("grafana_firing")))[0] == 200
        await eventually(lambda: roots(fake_slack), what="the Grafana root")
        first = roots(fake_slack)[0].result["ts"]
        await answered(fake_slack, first)
        unrouted = payload("alertmanager_firing")
        unrouted["commonLabels"]["severity"] = "info"
        unrouted["alerts"][0]["labels"]["severity"] = "info"
        assert (await hook(settings, AM, unrouted))[0] == 200
        assert (await hook(settings, AM, payload("alertmanager_firing")))[0] == 200  # over the limit of 1
        await processed(sqlite_url, 3)
        assert (await hook(settings, "/hooks/grafana", payload("grafana_resolved")))[0] == 200
        await processed(sqlite_url, 4)
        assert (await hook(settings, "/hooks/grafana", payload("grafana_firing")))[0] == 200  # within the cool-down
        await processed(sqlite_url, 5)
        async with aiohttp.ClientSession() as http, http.get(
                f"http://127.0.0.1:{settings.http_port}/metrics") as resp:
            metrics = await resp.text()
    finally:
        await served.stop()

    assert 'yokebot_adapter_events_total{kind="unrouted",platform="alertmanager"} 1.0' in metrics
    assert 'yokebot_adapter_events_total{kind="not_investigated",platform="alertmanager"} 1.0' in metrics
    assert 'yokebot_adapter_events_total{kind="investigated",platform="grafana"} 1.0' in metrics
    [grafana, storm] = roots(fake_slack)
    assert grafana["text"].startswith("🟠 *Alert firing:* `DiskFilling` · severity `warning`")
    assert "not investigated" not in grafana["text"]
    assert storm["text"].endswith("_not investigated: 2 alert groups in 10 minutes_")
    storm_thread = [p["text"] for p in fake_slack.posts(ROOT_CHANNEL, thread_ts=storm.result["ts"])]
    assert storm_thread == ["Not investigated (too many alert groups at once): `HighErrorRate`, `critical`: "
                            "`5xx ratio above 5% on the api`. Mention me here to look into it."]
    assert len(fake_llm.requests) == 1  # one investigation: Grafana's
    grafana_thread = [p["text"] for p in fake_slack.posts(ROOT_CHANNEL, thread_ts=first)]
    assert grafana_thread[-2].startswith("✅ Resolved at 2026-12-01 20:20:00 UTC:")  # Grafana's endsAt, +01:00
    assert grafana_thread[-1].startswith("🔁 Firing again at ") and "no new investigation" in grafana_thread[-1]
    edits = [c.params["text"] for c in fake_slack.calls_to("chat.update") if c.params.get("ts") == first]
    assert edits[0].startswith("✅ *Resolved at ") and edits[1].startswith("🟠 *Alert firing:* `DiskFilling`")
    assert len(roots(fake_slack)) == 2 and len(fake_llm.requests) == 1  # the same thread, no new investigation
    notes = await db_rows(sqlite_url, "SELECT note FROM alert_notifications ORDER BY id")
    assert [n.note for n in notes] == ["thread opened, investigation started", "no route",
                                       "thread opened, not investigated", "resolved",
                                       "fired again within the cool-down: same thread"]


async def test_a_group_firing_again_after_its_cool_down_gets_a_new_thread_and_investigation(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_slack: FakeSlack
):
    from sqlalchemy import text

    from bot.store.db import create_engine

    agents = tmp_path / "agents"
    ops_agent(agents)
    settings = settings_for(sqlite_url, fake_llm, agents, fake_slack)
    fake_llm.reply("First look: a bad deploy.").reply("Second look: the deploy again.")
    served = Served(settings)
    try:
        await up(settings)
        await hook(settings, AM, payload("alertmanager_firing"))
        await eventually(lambda: roots(fake_slack), what="the first root")
        await answered(fake_slack, roots(fake_slack)[0].result["ts"])
        await hook(settings, AM, payload("alertmanager_resolved"))
        await processed(sqlite_url, 2)
        engine = create_engine(sqlite_url)  # the cool-down (1h) ran out two hours ago
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE alert_groups SET resolved_at = datetime('now', '-2 hours')"))
        await engine.dispose()
        again = payload("alertmanager_firing")  # it fires again now (startsAt): two hours after it resolved
        for a in again["alerts"]:
            a["startsAt"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        await hook(settings, AM, again)
        await eventually(lambda: len(roots(fake_slack)) == 2, what="the second root")
        await answered(fake_slack, roots(fake_slack)[1].result["ts"])
    finally:
        await served.stop()
    first, second = (r.result["ts"] for r in roots(fake_slack))
    assert [p["text"] for p in fake_slack.posts(ROOT_CHANNEL, thread_ts=second)] == ["Second look: the deploy again."]
    inbox = await db_rows(sqlite_url, "SELECT event_key, state FROM inbox WHERE platform = 'alerts' ORDER BY id")
    assert [(r.event_key, r.state) for r in inbox] == [("1:1", "answered"), ("1:2", "answered")]
    sessions = await db_rows(sqlite_url, "SELECT thread FROM sessions ORDER BY created_at")
    assert [s.thread for s in sessions] == [first, second]


async def test_a_body_stored_by_a_process_that_died_before_processing_it_is_processed_at_the_next_start(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_slack: FakeSlack
):
    import json

    from bot.alerts.store import AlertStore
    from bot.store.db import create_engine, ensure_schema

    engine = create_engine(sqlite_url)  # what a killed instance left: a body acknowledged, never processed
    await ensure_schema(engine)
    await AlertStore(engine, "dead-instance", lease_seconds=600).accept(
        "alertmanager", json.dumps(payload("alertmanager_firing")))
    await engine.dispose()
    agents = tmp_path / "agents"
    ops_agent(agents)
    settings = settings_for(sqlite_url, fake_llm, agents, fake_slack)
    fake_llm.reply("Taken over: a bad deploy.")
    served = Served(settings)
    try:  # alone on its SQLite file, the new process takes it over at once (the lease has 10 minutes to run)
        await eventually(lambda: roots(fake_slack), timeout=30, what="the root of the stored body")
        await answered(fake_slack, roots(fake_slack)[0].result["ts"])
    finally:
        await served.stop()
    rows = await db_rows(sqlite_url, "SELECT state, attempts, note FROM alert_notifications")
    assert [(r.state, r.attempts, r.note) for r in rows] == [("done", 1, "thread opened, investigation started")]


async def test_at_most_max_concurrent_investigations_run_at_once(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_slack: FakeSlack
):
    import time

    from tests.fakes.openai_server import Step

    agents = tmp_path / "agents"
    ops_agent(agents)
    settings = settings_for(sqlite_url, fake_llm, agents, fake_slack, alert_max_concurrent=1)
    arrived: list[float] = []

    def slow(_: dict) -> Step:
        arrived.append(time.monotonic())
        return Step("reply", content="looked", delay=0.5)

    fake_llm.handler = slow
    served = Served(settings)
    try:
        await up(settings)
        for name in ("A", "B"):
            body = payload("alertmanager_firing")
            body["groupKey"] = f'{{}}:{{alertname="{name}"}}'
            assert (await hook(settings, AM, body))[0] == 200
        await eventually(lambda: len(roots(fake_slack)) == 2, what="two roots")
        for r in roots(fake_slack):
            await answered(fake_slack, r.result["ts"])
    finally:
        await served.stop()
    assert len(arrived) == 2 and arrived[1] - arrived[0] >= 0.45  # the second waited for the first's slot


async def test_a_root_slack_refuses_is_posted_when_the_body_is_retried(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_slack: FakeSlack
):
    agents = tmp_path / "agents"
    ops_agent(agents)
    settings = settings_for(sqlite_url, fake_llm, agents, fake_slack, inbox_lease_seconds=1.0)
    fake_llm.reply("Looked into it.")
    served = Served(settings)
    try:
        await up(settings)
        fake_slack.fail("chat.postMessage", error="fatal_error")  # the first post of the root fails
        assert (await hook(settings, AM, payload("alertmanager_firing")))[0] == 200
        await eventually(lambda: roots(fake_slack), timeout=30, what="the root, on the retry")
        await answered(fake_slack, roots(fake_slack)[0].result["ts"])
    finally:
        await served.stop()
    assert len(roots(fake_slack)) == 1 and len(fake_llm.requests) == 1
    rows = await db_rows(sqlite_url, "SELECT state, attempts FROM alert_notifications")
    assert [(r.state, r.attempts) for r in rows] == [("done", 1)]
