"""`yokebot agents show NAME` says who reaches an agent and where it posts: the channels it answers in, its
access lists, notify's targets, dedup window and limits, its schedules and its alert routes (in process)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from bot.cli import app as cli
from tests.helpers import write_agent
from tests.test_cli import ROOT

ONCALL = """
description: on call
timezone: Europe/Berlin
tools:
  current_time: {}
  notify: {max_per_turn: 3}
channels: ["slack:#ops", dm]
access:
  users: ["slack:U01ALICE"]
  roles: ["slack:S0ONCALL"]
  channels: ["slack:C0123ABCD", dm]
notify:
  default: "slack:#ops-alerts"
  allowed: ["slack:#ops-alerts", "discord:1234567890"]
  dedup_window_seconds: 300
schedules:
  - name: morning
    cron: "0 8 * * 1-5"
    prompt: Summarize the night's errors.
    post_to: "slack:#ops"
  - name: hourly
    every: 1h
    timezone: UTC
    prompt: Anything new?
    enabled: false
alerts:
  - match: {severity: critical, service: "~api|web"}
    post_to: "slack:#ops-alerts"
    prompt: Start with the {labels.service} logs.
    cooldown: 30m
"""


def show(agents: Path, name: str, *more: str) -> str:
    done = CliRunner().invoke(cli, ["agents", "show", name, *more], env={
        "YOKEBOT_AGENTS_DIR": str(agents), "YOKEBOT_DEFAULT_AGENT": "ops", "COLUMNS": "300"})
    assert done.exit_code == 0, done.output
    return done.output


def test_agents_show_lists_routing_access_notify_schedules_and_alert_routes(tmp_path: Path):
    write_agent(tmp_path / "agents", "oncall", ONCALL, body="You are on call.")
    out = show(tmp_path / "agents", "oncall")
    assert "answers in: slack:#ops, dm" in out
    assert "access: users slack:U01ALICE; channels slack:C0123ABCD, dm; roles slack:S0ONCALL" in out
    assert ("notify: to slack:#ops-alerts, discord:1234567890 (default slack:#ops-alerts); identical alerts within "
            "300 s are not repeated; at most 2 per reply, 3 per turn, 6 per channel per minute") in out
    assert ("schedule morning: cron '0 8 * * 1-5' (Europe/Berlin) -> slack:#ops, per_run session: Summarize the "
            "night's errors.") in out
    assert "schedule hourly: every 1h (UTC) -> nowhere (the run history only), per_run session, disabled" in out
    assert ('alerts[0]: severity="critical", service=~"api|web" -> slack:#ops-alerts, cool-down 30m; prompt: '
            "Start with the {labels.service} logs.") in out

    data = json.loads(show(tmp_path / "agents", "oncall", "--json"))
    assert data["channels"] == ["slack:#ops", "dm"] and data["access"]["roles"] == ["slack:S0ONCALL"]
    assert data["notify"]["dedup_window_seconds"] == 300 and data["notify"]["max_per_turn"] == 3
    assert [(s["name"], s["cron"], s["every"], s["enabled"]) for s in data["schedules"]] == [
        ("morning", "0 8 * * 1-5", None, True), ("hourly", None, "1h", False)]
    assert data["alerts"] == [{"match": [{"label": "severity", "value": "critical", "regex": False},
                                         {"label": "service", "value": "api|web", "regex": True}],
                               "post_to": "slack:#ops-alerts", "prompt": "Start with the {labels.service} logs.",
                               "cooldown_seconds": 1800}]
    assert data["system_prompt"].startswith("You are on call.")


def test_agents_show_of_the_shipped_ops_agent_names_its_alert_route_and_dedup_window():
    out = show(ROOT / "agents", "ops")
    assert "answers in: every channel no other agent lists (YOKEBOT_DEFAULT_AGENT)" in out
    assert "access: no lists of its own" in out
    assert "identical alerts within 600 s are not repeated" in out
    assert 'alerts[0]: severity=~"critical|warning" -> slack:#ops-alerts, cool-down 1h' in out
    logs = show(ROOT / "agents", "logs")
    assert "alerts: no routes" in logs and "no channel of its own" in logs


def test_agents_show_and_doctor_name_an_mcp_server_without_the_key_in_its_url_or_arguments(tmp_path: Path):
    """A hosted MCP server's key in its URL's query (or a stdio server's `--token` argument) was printed whole by
    `agents show` and `yokebot doctor`, whose output is pasted into issues; the log always redacted it."""
    from bot.engine.spec.mcp import McpServerSpec
    from bot.mcp.params import resolve

    key = "abcdef0123456789secret"
    write_agent(tmp_path / "agents", "hosted", f"""
description: hosted
mcp:
  files:
    url: "https://mcp.example.com/mcp?api_key={key}"
    tools: [search]
  local:
    command: /usr/bin/files-mcp
    args: ["--token", "{key}", "--read-only"]
    tools: [list]
""")
    out = show(tmp_path / "agents", "hosted")
    assert key not in out and "https://mcp.example.com/mcp?api_key=[REDACTED]" in out
    assert "/usr/bin/files-mcp --token [REDACTED] --read-only" in out
    url = resolve("files", McpServerSpec(url=f"https://mcp.example.com/mcp?api_key={key}"), tmp_path, {})
    assert url.where() == "https://mcp.example.com/mcp?api_key=[REDACTED]"  # doctor's and `mcp tools`' sentences
