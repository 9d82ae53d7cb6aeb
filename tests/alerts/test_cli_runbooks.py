"""`yokebot runbooks list|show|match` and `yokebot alerts test` with runbooks, as a user runs them (the Typer app
in-process, with the environment a user sets)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from bot.cli import app
from tests.alerts.harness import PAYLOADS
from tests.helpers import write_agent

REPO = Path(__file__).parents[2]


def env_for(tmp_path: Path, agents: Path, shared: Path | None = None) -> dict[str, str]:
    env = {"YOKEBOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}", "YOKEBOT_AGENTS_DIR": str(agents),
           "COLUMNS": "250"}
    if shared is not None:
        env["YOKEBOT_RUNBOOKS_DIR"] = str(shared)
    return env


def disk_alert(tmp_path: Path) -> Path:
    body = json.loads((PAYLOADS / "alertmanager_firing.json").read_text())
    for labels in (body["commonLabels"], body["alerts"][0]["labels"], body["groupLabels"]):
        labels["alertname"] = "HostOutOfDiskSpace"
    body["alerts"][0]["annotations"]["runbook_url"] = "https://wiki.example.com/runbooks/disk"
    path = tmp_path / "disk.json"
    path.write_text(json.dumps(body))
    return path


def test_list_show_and_match_on_the_shipped_ops_agent(tmp_path: Path):
    env = env_for(tmp_path, REPO / "agents")
    listed = CliRunner().invoke(app, ["runbooks", "list"], env=env)
    assert listed.exit_code == 0, listed.output
    assert "disk-full │ ops    │ Disk full or filling up" in listed.output and "nginx-5xx │ ops" in listed.output
    shown = CliRunner().invoke(app, ["runbooks", "show", "nginx-5xx"], env=env)
    assert shown.exit_code == 0 and "## Find the cause" in shown.output and "agents/ops/runbooks/nginx-5xx.md" in \
        shown.output
    missing = CliRunner().invoke(app, ["runbooks", "show", "nope"], env=env)
    assert missing.exit_code == 1 and "no runbook 'nope' (runbooks: disk-full, nginx-5xx)" in missing.output

    matched = CliRunner().invoke(app, ["runbooks", "match", str(disk_alert(tmp_path)), "--agent", "ops"], env=env)
    assert matched.exit_code == 0, matched.output
    assert "ops: 1 runbook(s)" in matched.output
    assert 'disk-full (own): Disk full or filling up; fits alertname="HostOutOfDiskSpace"' in matched.output
    assert ("runbook_url https://wiki.example.com/runbooks/disk: not fetched: https://wiki.example.com/runbooks/disk "
            "is not on this agent's runbooks: fetch: allow-list") in matched.output
    none = CliRunner().invoke(app, ["runbooks", "match", str(PAYLOADS / "grafana_firing.json")], env=env)
    assert none.exit_code == 1 and "ops: no runbook" in none.output
    assert not (tmp_path / "cli.db").exists()  # read-only


def test_a_broken_runbook_is_named_with_its_line_and_the_others_are_listed(tmp_path: Path):
    agents, shared = tmp_path / "agents", tmp_path / "shared"
    write_agent(agents, "ops", """
description: on call
tools: [current_time]
alerts:
  - match: {severity: critical}
    post_to: "slack:#ops"
""", files={"runbooks/good.md": "---\ntitle: Good\ndescription: g\nmatch: {alertname: HighErrorRate}\n---\nStep 1.",
            "runbooks/bad.md": "---\ntitle: Bad\ndescription: b\nmatch: {alertname: X}\nowner: me\n---\nx",
            "runbooks/open.md": "---\ntitle: Open\n"})
    shared.mkdir()
    (shared / "common.md").write_text("---\ntitle: Common\ndescription: c\nmatch: {service: api}\n---\nShared step.")
    env = env_for(tmp_path, agents, shared)
    listed = CliRunner().invoke(app, ["runbooks", "list"], env=env)
    assert listed.exit_code == 1
    assert "common │ ops (shared) │ Common" in listed.output and "good   │ ops" in listed.output
    assert "bad.md:5: owner: unknown key (allowed: title, description, match, tags); the other runbooks still load" \
        in listed.output
    assert "open.md:1: the YAML front matter is not closed with a '---' line" in listed.output
    test = CliRunner().invoke(app, ["alerts", "test", str(PAYLOADS / "alertmanager_firing.json")], env=env)
    assert test.exit_code == 0, test.output
    assert "Runbook common: Common (matched service=\"api\")" in test.output and "Runbook good: Good" in test.output
    assert "Step 1." in test.output and "Shared step." in test.output
