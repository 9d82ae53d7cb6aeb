"""What a user and the team see when a spend cap is reached: the notice posted once per period across instances
(the real Slack SDK against the fake Slack), a scheduled run and an alert investigation refused in their thread."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.app import build_platforms
from tests.alerts.harness import SLACK_TOKENS, TOKEN, Served, hook, payload, up
from tests.chat.slack_harness import answered
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.helpers import eventually, free_port, write_agent
from tests.scheduling.conftest import Harness
from tests.spend.conftest import PRICES, AppFactory, ask

NOTICE = ("yokebot: the daily token cap of agent {agent} is reached (1,500 of 1,000 tokens used today, UTC); new "
          "turns under it are refused until midnight UTC. `yokebot usage` shows the caps.")
REFUSED = ("Sorry, I can't take this on: the daily token cap of agent {agent} is reached (1,500 of 1,000 tokens "
           "used today, UTC); it resets at midnight UTC.")
TOKEN_CAP = """
spend:
  daily_tokens: 1000
notify:
  default: slack:#general
"""


async def test_the_first_refusal_posts_one_notice_across_instances(
    make_app: AppFactory, fake_llm: FakeOpenAI, agents_dir: Path, fake_slack: FakeSlack
):
    write_agent(agents_dir, "capped", "tools: [echo, notify]" + TOKEN_CAP)
    slack = {**SLACK_TOKENS, "slack_api_url": fake_slack.api_url}
    one, two = await make_app(**slack), await make_app(**slack)
    for app in (one, two):
        build_platforms(app)  # notify posts through the Slack adapter (not connected: posting needs no socket)
    fake_llm.reply("ok", usage=(1000, 500))
    assert (await ask(one, "spend it")).answer == "ok"
    refusals = await asyncio.gather(*(ask(app, f"again {n}", thread=f"t{n}") for n in range(3) for app in (one, two)))
    assert {r.stopped_by for r in refusals} == {"budget:daily_tokens"}, refusals
    assert {r.answer for r in refusals} == {REFUSED.format(agent="capped")}, refusals
    assert len(fake_llm.requests) == 1, fake_llm.requests
    notices = [p["text"] for p in fake_slack.posts("C_GENERAL")]
    assert notices == [NOTICE.format(agent="capped")]


async def test_a_scheduled_run_is_refused_and_says_so_in_its_channel(sqlite_url: str, fake_llm: FakeOpenAI,
                                                                      tmp_path: Path):
    agents = tmp_path / "agents"
    write_agent(agents, "reporter", """
tools: [echo, notify]
schedules:
  - name: tick
    every: 1s
    prompt: Write the status report.
    post_to: slack:#reports
""" + TOKEN_CAP)
    harness = Harness(sqlite_url, fake_llm, agents)
    try:
        app = await harness.app(model_prices=PRICES)
        fake_llm.reply("spent", usage=(1000, 500))
        assert (await ask(app, "use the tokens", agent="reporter")).answer == "spent"
        await harness.start(model_prices=PRICES)
        await eventually(lambda: len([p for p in harness.slack.posts if p[0] == "#reports"]) >= 2,
                         what="two scheduled runs")
    finally:
        await harness.close()
    reports = {text for channel, text in harness.slack.posts if channel == "#reports"}
    assert reports == {REFUSED.format(agent="reporter")}
    assert [p for p in harness.slack.posts if p[0] == "#general"] == [("#general", NOTICE.format(agent="reporter"))]
    assert len(fake_llm.requests) == 1


async def test_an_alert_investigation_is_refused_and_says_so_in_the_alert_thread(
    db_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_slack: FakeSlack, make_app: AppFactory
):
    agents = tmp_path / "served-agents"  # what `yokebot run` loads: its own tools only
    write_agent(agents, "ops", """
description: on call
tools: [current_time, notify]
alerts:
  - match: {severity: "~critical|warning"}
    post_to: "slack:#ops-alerts"
""" + TOKEN_CAP, body="You are the on-call agent.")
    settings = make_settings(db_url, fake_llm, agents, default_agent="ops", http_port=free_port(),
                             http_host="127.0.0.1", scheduler_enabled=False, slack_api_url=fake_slack.api_url,
                             webhook_token=TOKEN, model_prices=PRICES, **SLACK_TOKENS)
    fake_llm.reply("spent", usage=(1000, 500))
    seeded = await make_app(agents_dir=agents, default_agent="ops")
    assert (await ask(seeded, "use the tokens", agent="ops")).answer == "spent"
    served = Served(settings)
    try:
        await up(settings)
        assert (await hook(settings, "/hooks/alertmanager", payload("alertmanager_firing")))[0] == 200
        await eventually(lambda: [c for c in fake_slack.posts("C_OPS_ALERTS") if not c.params.get("thread_ts")
                                  and (c.result or {}).get("ts")], what="the alert's root message")
        root = next(c for c in fake_slack.posts("C_OPS_ALERTS") if not c.params.get("thread_ts"))
        await answered(fake_slack, root.result["ts"], emoji="white_check_mark")
    finally:
        await served.stop()
    thread = [p["text"] for p in fake_slack.posts("C_OPS_ALERTS", thread_ts=root.result["ts"])]
    assert thread == [REFUSED.format(agent="ops")]
    assert [p["text"] for p in fake_slack.posts("C_GENERAL")] == [NOTICE.format(agent="ops")]
    assert len(fake_llm.requests) == 1
