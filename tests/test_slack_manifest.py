"""One list of Slack scopes and events: docs/slack.md says what slack/manifest.yaml asks for, no more, no less,
and the README points there instead of keeping a copy."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _listed(section: str, label: str) -> list[str]:
    line = re.search(rf"- {label}:(.*?)(?=\n\s*- |\Z)", section, re.S)
    assert line is not None, f"docs/slack.md lists no {label}"
    return re.findall(r"`([^`]+)`", line.group(1))


def test_docs_list_exactly_the_manifests_scopes_and_events():
    manifest = yaml.safe_load((ROOT / "slack/manifest.yaml").read_text())
    doc = (ROOT / "docs/slack.md").read_text()
    section = doc.split("<!-- slack-manifest:begin -->")[1].split("<!-- slack-manifest:end -->")[0]
    assert _listed(section, "bot scopes") == manifest["oauth_config"]["scopes"]["bot"]
    assert _listed(section, "bot events") == manifest["settings"]["event_subscriptions"]["bot_events"]
    assert "reinstall the app" in doc.lower()


def test_http_mode_documents_both_request_urls():
    doc = (ROOT / "docs/slack.md").read_text()
    manifest = (ROOT / "slack/manifest.yaml").read_text()
    assert "event_subscriptions.request_url" in doc and "interactivity.request_url" in doc
    assert manifest.count("# request_url: https://yokebot.example.com/slack/events") == 2


def test_the_readme_keeps_no_second_list_of_scopes():
    readme = (ROOT / "README.md").read_text()
    assert "reactions:write" not in readme and "docs/slack.md" in readme


def test_the_manifest_declares_the_slash_command_the_adapter_listens_for():
    from bot.chat.slack.commands import COMMAND

    manifest = yaml.safe_load((ROOT / "slack/manifest.yaml").read_text())
    assert [c["command"] for c in manifest["features"]["slash_commands"]] == [COMMAND]
    assert "commands" in manifest["oauth_config"]["scopes"]["bot"]
    assert "# url: https://yokebot.example.com/slack/events" in (ROOT / "slack/manifest.yaml").read_text()
