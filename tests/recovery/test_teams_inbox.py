"""Teams activities on the durable inbox, with `yokebot run` as real processes: killed with SIGKILL mid-turn, the
restarted process (SQLite) or the lease's expiry (PostgreSQL) answers each activity once, where it was asked, and
an alert already sent is not sent again; two instances behind one endpoint answer an activity delivered to both
exactly once."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.teams import ALERTS, OPS, PERSONAL, FakeTeams
from tests.helpers import db_rows, write_agent
from tests.recovery.harness import OPS_AGENT as SLACK_OPS_AGENT
from tests.recovery.harness import Bot, free_port, wait_until
from tests.recovery.test_discord_inbox import ALERT, SlowModel
from tests.recovery.test_instances import readyz

OPS_AGENT = SLACK_OPS_AGENT.replace("slack:#ops-alerts", "teams:#ops-alerts")


def teams_env(tmp: Path, db_url: str, fake: FakeTeams, llm: FakeOpenAI) -> dict[str, str]:
    agents = tmp / "agents"
    write_agent(agents, "ops", OPS_AGENT)
    return {**os.environ, **fake.env(), "YOKEBOT_DATABASE_URL": db_url, "YOKEBOT_AGENTS_DIR": str(agents),
            "YOKEBOT_DEFAULT_AGENT": "ops", "OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "sk-test-123456",
            "YOKEBOT_MODEL": "test-model", "YOKEBOT_MODEL_MAX_ATTEMPTS": "1", "YOKEBOT_HTTP_PORT": str(free_port()),
            "YOKEBOT_HTTP_HOST": "127.0.0.1", "YOKEBOT_SCHEDULER_ENABLED": "false",
            "YOKEBOT_INBOX_LEASE_SECONDS": "2", "YOKEBOT_LOG_LEVEL": "INFO", "YOKEBOT_PROGRESS_LIVE": "false"}


def deliver(fake: FakeTeams, env: dict[str, str], activity: dict[str, Any]) -> int:
    return asyncio.run(fake.deliver(f"http://127.0.0.1:{env['YOKEBOT_HTTP_PORT']}/teams/messages", activity))


def test_kill9_then_restart_answers_each_teams_activity_once_where_it_was_asked(
        tmp_path: Path, db_url: str, fake_teams: FakeTeams, fake_llm: FakeOpenAI):
    model = SlowModel()
    fake_llm.handler = model
    env = teams_env(tmp_path, db_url, fake_teams, fake_llm)
    first = Bot(env, tmp_path, "first")
    in_channel, in_chat = fake_teams.activity("how is host 1?"), fake_teams.activity("how is host 2?", kind="personal")
    alert = fake_teams.activity(ALERT)
    chain, alert_chain = f"{OPS};messageid={in_channel['id']}", f"{OPS};messageid={alert['id']}"
    try:
        wait_until(lambda: readyz(env["YOKEBOT_HTTP_PORT"]) == 200, 60, "yokebot run", first)
        assert [deliver(fake_teams, env, a) for a in (in_channel, in_chat, alert)] == [200, 200, 200]
        wait_until(lambda: len(fake_llm.requests) >= 4, 15, "the model requests", first)
        wait_until(lambda: fake_teams.texts_in(ALERTS) or [s for s in fake_teams.sent
                                                            if s.conversation.startswith(ALERTS)], 10, "the alert")
        wait_until(lambda: asyncio.run(db_rows(db_url, "SELECT count(*) FROM turns"))[0][0] >= 3, 10,
                   "every turn's row", first)
    finally:
        first.kill9()
    assert fake_teams.texts_in(chain) == fake_teams.texts_in(PERSONAL) == []  # nobody has an answer yet

    model.fast = True
    second = Bot(env, tmp_path, "second")
    try:
        wait_until(lambda: fake_teams.texts_in(chain) and fake_teams.texts_in(PERSONAL)
                   and fake_teams.texts_in(alert_chain), 60, "a reply to every activity", second)
        assert deliver(fake_teams, env, in_channel) == 200  # the connector retries one: it was taken before
        asyncio.run(asyncio.sleep(1.0))  # nothing else comes
    finally:
        assert second.stop() == 0, second.output()[-3000:]
    assert fake_teams.texts_in(chain) == ["answer: how is host 1?"]
    assert fake_teams.texts_in(PERSONAL) == ["answer: how is host 2?"]
    [note] = fake_teams.texts_in(alert_chain)
    assert "restarted" in note and "`notify`" in note and "not done twice" in note
    assert len([s for s in fake_teams.sent if s.conversation.startswith(ALERTS)]) == 1  # not alerted again
    inbox = asyncio.run(db_rows(db_url, "SELECT trigger, state FROM inbox WHERE platform = 'teams' ORDER BY id"))
    assert [tuple(r) for r in inbox] == [("mention", "answered"), ("dm", "answered"), ("mention", "interrupted")]


def test_two_instances_answer_an_activity_delivered_to_both_exactly_once(
        tmp_path: Path, pg_database: str, fake_teams: FakeTeams, fake_llm: FakeOpenAI):
    fake_llm.handler = SlowModel()
    fake_llm.handler.fast = True
    one = teams_env(tmp_path, pg_database, fake_teams, fake_llm)
    two = {**one, "YOKEBOT_HTTP_PORT": str(free_port())}
    bots = [Bot(one, tmp_path, "one"), Bot(two, tmp_path, "two")]
    activities = [fake_teams.activity(f"question {i}", root="1700000000000") for i in range(4)]
    try:
        for bot, env in zip(bots, (one, two), strict=True):
            wait_until(lambda e=env: readyz(e["YOKEBOT_HTTP_PORT"]) == 200, 60, "yokebot run", bot)
        for activity in activities:  # each to both instances, as a retry through a load balancer would
            assert deliver(fake_teams, one, activity) == 200 and deliver(fake_teams, two, activity) == 200
        chain = f"{OPS};messageid=1700000000000"
        wait_until(lambda: len(fake_teams.texts_in(chain)) >= 4, 60, "every answer", bots[0])
        asyncio.run(asyncio.sleep(1.0))
    finally:
        codes = [bot.stop() for bot in bots]
    assert codes == [0, 0]
    assert fake_teams.texts_in(chain) == [f"answer: question {i}" for i in range(4)]  # once each, in order
    assert len(fake_llm.requests) == 4
