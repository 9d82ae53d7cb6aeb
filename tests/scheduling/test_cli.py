"""`yokebot schedule ...` as users run it: `schedule run` in a real subprocess, the rest through
Typer's runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from tests.fakes.discord_server import OPS_ALERTS, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.helpers import write_agent

PROFILE = """
tools: [current_time]
schedules:
  - name: tick
    cron: "0 9 * * 1-5"
    prompt: Write the status report.
    post_to: slack:#reports
"""


@pytest.fixture
def cli_env(tmp_path: Path, fake_llm: FakeOpenAI) -> dict[str, str]:
    write_agent(tmp_path / "agents", "reporter", PROFILE, body="You write status reports.")
    return {
        "YOKEBOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'y.db'}",
        "YOKEBOT_AGENTS_DIR": str(tmp_path / "agents"),
        "OPENAI_BASE_URL": fake_llm.base_url,
        "OPENAI_API_KEY": "sk-test-key-123",
        "YOKEBOT_MODEL": "test-model",
        "YOKEBOT_MODEL_RETRY_BASE_SECONDS": "0.01",
    }


def yokebot(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        env={**os.environ, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def invoke(env: dict[str, str], *args: str):
    return CliRunner().invoke(app, list(args), env=env)


def test_schedule_run_runs_it_now_prints_the_report_and_records_it(cli_env, tmp_path, fake_llm: FakeOpenAI):
    fake_llm.reply("Everything is green.")
    done = yokebot(cli_env, tmp_path, "schedule", "run", "tick")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Everything is green."
    assert "reporter/tick: ok" in done.stderr
    assert "not posted to slack:#reports: its platform is not configured in this process" in done.stderr
    assert fake_llm.requests[0]["messages"][-1] == {"role": "user", "content": "Write the status report."}

    fake_llm.fail(400, message="no such model")
    failed = yokebot(cli_env, tmp_path, "schedule", "run", "reporter/tick")
    assert failed.returncode == 1
    assert failed.stdout.startswith("Scheduled report reporter/tick failed: ")
    assert "no such model" in failed.stdout

    history = invoke(cli_env, "schedule", "history", "tick", "--json")
    assert history.exit_code == 0, history.output
    runs = json.loads(history.output)
    assert [(r["kind"], r["status"], r["posted_ref"]) for r in runs] == [
        ("manual", "failed", "log"),
        ("manual", "ok", "log"),
    ]
    assert "no such model" in runs[0]["error"] and runs[1]["error"] is None
    assert runs[0]["session_id"] != runs[1]["session_id"]


def test_schedule_run_posts_the_report_to_slack_when_a_bot_token_is_set(
    cli_env, tmp_path, fake_llm: FakeOpenAI, fake_slack: FakeSlack
):
    """No Socket Mode, no HTTP route: only SLACK_BOT_TOKEN and the Web API, in a process of its own."""
    fake_llm.reply("Everything is **green**.")
    env = {**cli_env, "SLACK_BOT_TOKEN": "xoxb-cli-post-token-42", "SLACK_API_URL": fake_slack.api_url}
    done = yokebot(env, tmp_path, "schedule", "run", "tick")
    assert done.returncode == 0, done.stderr
    [post] = fake_slack.posts("C_REPORTS")  # `#reports` resolved to its ID, Markdown as mrkdwn
    assert post["text"] == "Everything is *green*." and post["_auth"] == "Bearer xoxb-cli-post-token-42"
    assert "thread_ts" not in post.params
    assert fake_slack.calls_to("apps.connections.open") == []
    assert "reporter/tick: ok · posted to slack:#reports (slack:C_REPORTS:" in done.stderr
    assert "xoxb-cli-post-token-42" not in done.stderr + done.stdout
    runs = json.loads(invoke(cli_env, "schedule", "history", "tick", "--json").output)
    assert runs[0]["posted_ref"].startswith("slack:C_REPORTS:")

    fake_slack.fail("chat.postMessage", error="not_in_channel")
    fake_llm.reply("Still green.")
    refused = invoke(env, "schedule", "run", "tick")
    assert refused.exit_code == 1
    assert "not posted to slack:#reports (posting to slack:#reports failed: Slack refused the post to " \
           "#reports: not_in_channel (invite the bot" in refused.output


def test_schedule_run_posts_to_discord_over_rest_without_the_gateway(
    cli_env, fake_llm: FakeOpenAI, fake_discord: FakeDiscord
):
    added = invoke(cli_env, "schedule", "add", "disks", "--agent", "reporter", "--every", "1h",
                   "--prompt", "Check the disks.", "--post-to", "discord:#ops-alerts")
    assert added.exit_code == 0, added.output
    fake_llm.reply("Disks: 41% used.")
    env = {**cli_env, "DISCORD_BOT_TOKEN": "discord-cli-token-0123456789", "DISCORD_API_URL": fake_discord.api_url}
    done = invoke(env, "schedule", "run", "disks")
    assert done.exit_code == 0, done.output
    [post] = fake_discord.posted_in(OPS_ALERTS)  # `#ops-alerts` found among the guild's channels over REST
    assert post.content == "Disks: 41% used." and post.body["allowed_mentions"] == {"parse": []}
    assert f"posted to discord:#ops-alerts (discord:{OPS_ALERTS}/{post.id})" in done.output
    assert fake_discord.ops == []  # never opened the gateway


def test_add_list_pause_resume_remove(cli_env):
    added = invoke(
        cli_env,
        "schedule",
        "add",
        "disk-check",
        "--agent",
        "reporter",
        "--every",
        "15m",
        "--prompt",
        "Check the disks.",
        "--post-to",
        "discord:123",
    )
    assert added.exit_code == 0, added.output
    assert "added disk-check: every 15m, posting to discord:123" in added.output

    listed = invoke(cli_env, "--help")  # the sub-app is wired into the main CLI
    assert "schedule" in listed.output
    listed = CliRunner().invoke(app, ["schedule", "list"], env={**cli_env, "COLUMNS": "200"})
    assert listed.exit_code == 0
    lines = {line.split("│")[1].strip(): line for line in listed.output.splitlines() if line.startswith("│")}
    assert set(lines) == {"disk-check", "reporter/tick"}
    assert "every 15m" in lines["disk-check"] and "enabled" in lines["disk-check"]
    assert "cron 0 9 * * 1-5 (UTC)" in lines["reporter/tick"] and "09:00:00 UTC" in lines["reporter/tick"]

    assert invoke(cli_env, "schedule", "pause", "tick").output.strip() == "reporter/tick: paused"
    listed = CliRunner().invoke(app, ["schedule", "list"], env={**cli_env, "COLUMNS": "200"})
    assert "paused" in next(line for line in listed.output.splitlines() if "reporter/tick" in line)
    assert invoke(cli_env, "schedule", "resume", "tick").output.strip() == "reporter/tick: resumed"

    refused = invoke(cli_env, "schedule", "remove", "tick")
    assert refused.exit_code == 1 and "declared in the reporter profile" in refused.output
    assert invoke(cli_env, "schedule", "remove", "disk-check").exit_code == 0
    missing = invoke(cli_env, "schedule", "history", "disk-check")
    assert missing.exit_code == 1 and "There is no schedule 'disk-check'" in missing.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--every", "soon"], "'soon' is not an interval"),
        (["--cron", "0 25 * * *"], "hour value '25' is outside 0-23"),
        ([], "needs exactly one of cron or every"),
        (["--every", "1h", "--post-to", "ops"], "write it as platform:channel"),
    ],
)
def test_add_refuses_a_bad_schedule_with_one_sentence(cli_env, args, message):
    result = invoke(cli_env, "schedule", "add", "x", "--agent", "reporter", "--prompt", "p", *args)
    assert result.exit_code == 2 and message in result.output
    assert "Traceback" not in result.output
    assert "x" not in invoke(cli_env, "schedule", "list").output.split()


def test_add_refuses_a_platform_yokebot_cannot_post_to(tmp_path):
    from typer.testing import CliRunner

    from bot.cli import app
    from tests.helpers import write_agent

    agents = tmp_path / "agents"
    write_agent(agents, "ops", "description: ops\ntools: [current_time]")
    env = {"YOKEBOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'y.db'}", "YOKEBOT_AGENTS_DIR": str(agents),
           "COLUMNS": "200"}
    result = CliRunner().invoke(app, ["schedule", "add", "nightly", "--agent", "ops", "--prompt", "report",
                                      "--every", "1d", "--post-to", "zulip:#x"], env=env)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    from bot.chat.platforms import names

    *others, last = names()
    assert "'zulip:#x' names an unknown platform" in text and f"{', '.join(others)} and {last}" in text
    listed = CliRunner().invoke(app, ["schedule", "list"], env=env)
    assert "nightly" not in listed.stdout
