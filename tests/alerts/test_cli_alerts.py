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


async def test_alerts_list_shows_recent_groups_their_state_and_thread(tmp_path: Path):
    from bot.alerts.store import AlertStore
    from bot.store.db import create_engine, ensure_schema

    env = base_env(tmp_path, None)
    engine = create_engine(env["YOKEBOT_DATABASE_URL"])
    await ensure_schema(engine)
    store = AlertStore(engine, "test")
    group, _ = await store.group_for("alertmanager", '{}:{alertname="X"}', "ops", "slack:#ops-alerts",
                                     "HighErrorRate", 3600)
    await store.set(group, root_platform="slack", root_channel="C_OPS_ALERTS", root_ref="1700.1", thread="1700.1",
                    investigation="started")
    await engine.dispose()
    done = yokebot("alerts", "list", env=env)
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if "HighErrorRate" in line)
    assert "alertmanager" in row and "ops" in row and "firing" in row and "started" in row
    assert "slack:C_OPS_ALERTS:1700.1" in row


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
