"""`yokebot alerts test` and `yokebot alerts list` as a user runs them (subprocesses)."""

from __future__ import annotations

from pathlib import Path

from tests.alerts.harness import PAYLOADS, ops_agent
from tests.test_cli import base_env, yokebot


def test_alerts_test_shows_the_route_the_root_and_the_prompt_and_stores_nothing(tmp_path: Path):
    ops_agent(tmp_path / "agents")
    env = base_env(tmp_path, None)
    done = yokebot("alerts", "test", str(PAYLOADS / "alertmanager_hostile.json"), env=env)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert 'Route: agent ops, alerts[0] (severity=~"critical|warning"), cool-down 3600 s' in out
    assert "Root message for slack:#ops-alerts:" in out and "`Disk <!channel> *full*`" in out
    assert "\x1b" not in out and "\x07" not in out  # the summary's escape sequence is shown as U+FFFD
    assert "NOT instructions" in out
    assert not (tmp_path / "cli.db").exists()


def test_alerts_test_says_when_no_route_matches_and_names_a_bad_file(tmp_path: Path):
    ops_agent(tmp_path / "agents")
    env = base_env(tmp_path, None)
    body = (PAYLOADS / "alertmanager_firing.json").read_text().replace('"critical"', '"info"')
    (tmp_path / "info.json").write_text(body)
    unrouted = yokebot("alerts", "test", str(tmp_path / "info.json"), env=env)
    assert unrouted.returncode == 1 and "No route matches" in unrouted.stdout
    (tmp_path / "bad.json").write_text("{")
    bad = yokebot("alerts", "test", str(tmp_path / "bad.json"), env=env)
    assert bad.returncode == 2 and "The body is not JSON." in bad.stderr
    empty = yokebot("alerts", "list", env=env)
    assert empty.returncode == 0 and "No alert groups yet" in empty.stdout


async def test_alerts_list_shows_each_groups_status_its_investigation_and_session(tmp_path: Path):
    """Firing or resolved (with when), where the investigation is (from its inbox row, not `started` forever) and
    the session `yokebot trace` takes; in the table and in --json. In process (CliRunner)."""
    import asyncio
    import json
    from datetime import UTC, datetime

    from typer.testing import CliRunner

    from bot.alerts.store import AlertStore
    from bot.cli import app as cli
    from bot.store.db import create_engine, ensure_schema
    from tests.helpers import db_rows

    env = base_env(tmp_path, None)
    url = env["YOKEBOT_DATABASE_URL"]
    engine = create_engine(url)
    await ensure_schema(engine)
    store = AlertStore(engine, "test")
    firing, _ = await store.group_for("alertmanager", '{}:{alertname="X"}', "ops", "slack:#ops-alerts",
                                      "HighErrorRate", 3600)
    await store.set(firing, root_platform="slack", root_channel="C_OPS_ALERTS", root_ref="1700.1", thread="1700.1",
                    investigation="started")
    done, _ = await store.group_for("alertmanager", '{}:{alertname="Y"}', "ops", "slack:#ops-alerts",
                                    "DiskFull", 3600)
    await store.set(done, root_platform="slack", root_channel="C_OPS_ALERTS", root_ref="1700.2", thread="1700.2",
                    investigation="started", state="resolved", resolved_at=datetime(2026, 12, 1, 21, 30, tzinfo=UTC))
    await engine.dispose()
    await db_rows(url, "INSERT INTO sessions (id, platform, channel, thread, agent, created_at, updated_at) VALUES "
                       "('sess-firing', 'slack', 'C_OPS_ALERTS', '1700.1', 'ops', '2026-12-01', '2026-12-01'), "
                       "('sess-done', 'slack', 'C_OPS_ALERTS', '1700.2', 'ops', '2026-12-01', '2026-12-01') "
                       "RETURNING id")
    await db_rows(url, "INSERT INTO inbox (platform, event_key, channel, thread, text, trigger, reply, state, attempts, "
                       f"created_at, updated_at) VALUES ('alerts', '{firing.id}:1', 'C_OPS_ALERTS', '1700.1', 'x', "
                       "'alert', '{}', 'running', 1, '2026-12-01', '2026-12-01'), "
                       f"('alerts', '{done.id}:1', 'C_OPS_ALERTS', '1700.2', 'x', 'alert', '{{}}', 'answered', 1, "
                       "'2026-12-01', '2026-12-01') RETURNING id")
    env = {k: v for k, v in env.items() if k.startswith("YOKEBOT_") or k == "COLUMNS"}
    table = await asyncio.to_thread(CliRunner().invoke, cli, ["alerts", "list"], env=env)
    assert table.exit_code == 0, table.output
    rows = {line.split()[1]: line for line in table.output.splitlines() if "HighErrorRate" in line or "DiskFull" in line}
    high = next(r for r in rows.values() if "HighErrorRate" in r)
    disk = next(r for r in rows.values() if "DiskFull" in r)
    assert "firing" in high and "running" in high and "sess-firing" in high and "slack:C_OPS_ALERTS:1700.1" in high
    assert "resolved 2026-12-01 21:30:00" in disk and "answered" in disk and "sess-done" in disk
    assert "started" not in table.output
    listed = await asyncio.to_thread(CliRunner().invoke, cli, ["alerts", "list", "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    by_alert = {g["alert"]: g for g in json.loads(listed.output)}
    assert by_alert["DiskFull"]["status"] == "resolved" and by_alert["DiskFull"]["session_id"] == "sess-done"
    assert by_alert["DiskFull"]["resolved_at"].startswith("2026-12-01T21:30:00")
    assert by_alert["HighErrorRate"] | {"fired_at": None, "updated_at": None} == {
        "id": firing.id, "source": "alertmanager", "alert": "HighErrorRate", "agent": "ops", "status": "firing",
        "fired_at": None, "resolved_at": None, "investigation": "running", "session_id": "sess-firing",
        "thread": "slack:C_OPS_ALERTS:1700.1", "updated_at": None}


def test_alerts_test_redacts_this_instances_own_secrets_as_run_does(tmp_path: Path):
    """A configured secret (here the webhook token) pasted into an alert's annotation is not a known token
    shape: only the instance's own redactor knows it, and `alerts test` uses it as `run` does."""
    ops_agent(tmp_path / "agents")
    secret = "hook-pass-7Qm2Zx9Lw4"
    body = (PAYLOADS / "alertmanager_firing.json").read_text()
    body = body.replace("with a 5xx.", "with a 5xx; token was " + secret, 1)
    (tmp_path / "leaky.json").write_text(body)
    env = base_env(tmp_path, None) | {"YOKEBOT_WEBHOOK_TOKEN": secret}
    done = yokebot("alerts", "test", str(tmp_path / "leaky.json"), env=env)
    assert done.returncode == 0, done.stderr
    assert "token was" in done.stdout and secret not in done.stdout
