"""deploy/prometheus/yokebot-rules.yml passes `promtool check rules`, and its unit tests (yokebot-rules.test.yml)
pass `promtool test rules`; those tests make every rule fire and also not fire, and every rule carries a summary
and a one-line runbook. Skipped without promtool unless YOKEBOT_REQUIRE_PROMETHEUS=1."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = RULES_DIR / "yokebot-rules.yml"
TESTS = RULES_DIR / "yokebot-rules.test.yml"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("YOKEBOT_REQUIRE_PROMETHEUS") == "1":
            pytest.fail("YOKEBOT_REQUIRE_PROMETHEUS=1 but promtool is not installed")
        pytest.skip("promtool not installed (apt-get install prometheus)")
    return found


def rules() -> list[dict[str, object]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_promtool_checks_the_rules():
    ran = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"SUCCESS: {len(rules())} rules found" in ran.stdout


def test_promtool_runs_the_unit_tests():
    ran = subprocess.run([promtool(), "test", "rules", TESTS.name], cwd=RULES_DIR, capture_output=True, text=True,
                         timeout=60)
    assert ran.returncode == 0 and "SUCCESS" in ran.stdout, ran.stdout + ran.stderr


def test_every_rule_is_tested_firing_and_quiet_and_has_a_runbook():
    cases = [c for t in yaml.safe_load(TESTS.read_text())["tests"] for c in t["alert_rule_test"]]
    names = [str(r["alert"]) for r in rules()]
    assert {"YokebotDown", "YokebotInboxBacklogGrowing", "YokebotInboxItemStuck", "YokebotModelErrors",
            "YokebotApprovalsOverdue", "YokebotMCPServerDown", "YokebotOTelExportFailing",
            "YokebotSpendNearCap", "YokebotSpendCapReached"} == set(names)
    for name in names:
        assert any(c["alertname"] == name and c["exp_alerts"] for c in cases), f"{name} is never tested firing"
        assert any(c["alertname"] == name and not c["exp_alerts"] for c in cases), f"{name} is never tested quiet"
    for rule in rules():
        annotations = rule["annotations"]
        assert isinstance(annotations, dict) and annotations["summary"] and annotations["runbook"], rule["alert"]
        assert "\n" not in str(annotations["runbook"]), rule["alert"]


def test_the_rules_name_only_metrics_yokebot_exports():
    """Every yokebot_* name in an expression is a metric of bot/observability (or the MCP manager's)."""
    import re

    from bot.observability.metrics import Metrics

    # the spend ratios and the MCP gauges join the registry when spend caps or MCP servers are configured
    exported = {m.name for m in Metrics().registry.collect()} | {"yokebot_spend_ratio", "yokebot_mcp_server_up"}
    for rule in rules():
        for name in re.findall(r"\byokebot_[a-z_]+", str(rule["expr"])):
            base = re.sub(r"_(total|count|sum|bucket)$", "", name)
            assert name in exported or base in exported, f"{rule['alert']} uses {name}, which yokebot does not export"
