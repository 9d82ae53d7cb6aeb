"""docs/alerts.md followed top to bottom with the shipped agents (the checkout's agents/, untouched): the token set,
Slack configured, Alertmanager's body posted -> a thread in #ops-alerts with ops's investigation. The
investigation notifies #ops-alerts (ops's notify default), the channel its root is in: the alert goes into the
alert's thread, not a second top-level post. And `doctor` says what is missing for alerts, in one sentence."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from bot.cli import app as cli
from tests.alerts.harness import ROOT_CHANNEL, SLACK_TOKENS, TOKEN, Served, hook, payload, processed, up
from tests.chat.slack_harness import answered
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, call
from tests.fakes.slack_server import FakeSlack
from tests.helpers import db_rows, eventually, free_port, write_agent
from tests.test_cli import ROOT

SHIPPED = ROOT / "agents"
ALERT = "api-1 answers 7% of requests with a 5xx since 21:00 (bad deploy?)"


async def test_the_shipped_ops_agent_investigates_an_alert_and_notifies_into_its_thread(
    db_url: str, fake_llm: FakeOpenAI, fake_slack: FakeSlack
):
    settings = make_settings(db_url, fake_llm, SHIPPED, default_agent="ops", http_port=free_port(),
                             http_host="127.0.0.1", scheduler_enabled=False, slack_api_url=fake_slack.api_url,
                             webhook_token=TOKEN, **SLACK_TOKENS)
    fake_llm.calls(call("notify", {"message": ALERT}))  # ops's notify default: slack:#ops-alerts
    fake_llm.reply("Degraded: api-1 serves 5xx since 21:00; roll back its deploy.")
    served = Served(settings)
    try:
        await up(settings)
        assert (await hook(settings, "/hooks/alertmanager", payload("alertmanager_firing")))[0] == 200
        await processed(db_url, 1)
        tops = lambda: [c for c in fake_slack.posts(ROOT_CHANNEL) if not c.params.get("thread_ts")]  # noqa: E731
        [root] = await eventually(tops, what="the root in #ops-alerts")
        ts = root.result["ts"]
        await answered(fake_slack, ts)
    finally:
        await served.stop()

    assert root["text"].startswith("🔴 *Alert firing:* `HighErrorRate`")
    assert len(tops()) == 1  # the notify did not add a second top-level post to #ops-alerts ...
    thread = [p["text"] for p in fake_slack.posts(ROOT_CHANNEL, thread_ts=ts)]
    assert ALERT in thread  # ... it went into the alert's thread
    assert thread[-1] == "Degraded: api-1 serves 5xx since 21:00; roll back its deploy."
    [notified] = await db_rows(db_url, "SELECT status, result FROM tool_invocations WHERE tool = 'notify'")
    assert notified.status == "ok" and notified.result.startswith(f"Posted to slack:#ops-alerts (ref slack:{ROOT_CHANNEL}:")
    [group] = await db_rows(db_url, "SELECT agent, post_to FROM alert_groups")
    assert (group.agent, group.post_to) == ("ops", "slack:#ops-alerts")  # the shipped route


def _doctor(env: dict[str, str]) -> str:
    done = CliRunner().invoke(cli, ["doctor"], env=env)
    return " ".join(done.output.split())


def test_doctor_checks_the_webhook_token_and_that_some_agent_has_a_route(tmp_path: Path, fake_slack: FakeSlack):
    env = {"YOKEBOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'd.db'}", "YOKEBOT_AGENTS_DIR": str(SHIPPED),
           "SLACK_BOT_TOKEN": "xoxb-fake-123456", "SLACK_API_URL": fake_slack.api_url, "OPENAI_API_KEY": "",
           "OPENAI_BASE_URL": "", "YOKEBOT_WEBHOOK_TOKEN": "", "COLUMNS": "300"}
    no_token = _doctor(env)
    assert ("! alerts: ops route alerts to slack:#ops-alerts, but YOKEBOT_WEBHOOK_TOKEN is not set, so `yokebot "
            "run` serves no /hooks/alertmanager or /hooks/grafana (senders get 404)") in no_token
    assert "fix: set YOKEBOT_WEBHOOK_TOKEN and give it to Alertmanager or Grafana (docs/alerts.md)" in no_token

    on = _doctor(env | {"YOKEBOT_WEBHOOK_TOKEN": TOKEN})
    assert "✓ alerts: webhooks on at /hooks/alertmanager and /hooks/grafana (port 8080); routes in ops" in on

    without_slack = _doctor(env | {"YOKEBOT_WEBHOOK_TOKEN": TOKEN, "SLACK_BOT_TOKEN": ""})
    assert ("! agent ops: alerts[0] posts to slack:#ops-alerts, but slack is not configured, so its alert groups "
            "are accepted and not posted") in without_slack
    assert "fix: set SLACK_BOT_TOKEN, or change post_to: in" in without_slack

    chat_only = _doctor(env | {"SLACK_BOT_TOKEN": ""})  # nothing to post alerts to here: not expected, not a warning
    assert "✓ alerts: off: YOKEBOT_WEBHOOK_TOKEN is not set (the alerts: routes of ops wait for it" in chat_only

    write_agent(tmp_path / "agents", "ops", "description: on call\ntools: [current_time]\n", body="On call.")
    no_route = _doctor(env | {"YOKEBOT_WEBHOOK_TOKEN": TOKEN, "YOKEBOT_AGENTS_DIR": str(tmp_path / "agents")})
    assert ("! alerts: YOKEBOT_WEBHOOK_TOKEN is set, but no agent has an alerts: route, so every alert is accepted "
            "and none is posted or investigated") in no_route
    assert TOKEN not in no_token + on + without_slack + no_route


async def test_the_post_only_path_of_chat_ask_and_schedule_run_follows_the_same_rule(
    sqlite_url: str, fake_llm: FakeOpenAI, fake_slack: FakeSlack, tmp_path: Path
):
    """`chat`, `ask` and `schedule run` post through the post-only adapters `posting(app)` registers: a turn in a
    thread of #ops-alerts (`ask --session` of an alert's session) notifying #ops-alerts replies in that thread."""
    from bot.app import build_app, posting
    from bot.engine.messages import Scope

    settings = make_settings(sqlite_url, fake_llm, SHIPPED, default_agent="ops", slack_api_url=fake_slack.api_url,
                             **SLACK_TOKENS)
    app = await build_app(settings)
    try:
        async with posting(app):
            await app.notifier.notify("slack:#ops-alerts", "in the thread", Scope("slack", ROOT_CHANNEL, "1700.1"))
            await app.notifier.notify("slack:#ops-alerts", "at the top", Scope("slack", "C_GENERAL", "1700.2"))
            await app.notifier.notify("slack:#ops-alerts", "from the terminal", Scope("console", "terminal", "ops"))
    finally:
        await app.close()
    posts = [(p["text"], p.params.get("thread_ts")) for p in fake_slack.posts(ROOT_CHANNEL)]
    assert posts == [("in the thread", "1700.1"), ("at the top", None), ("from the terminal", None)]
