"""Issue 37.7: PostgreSQL itself is stopped (`pg_ctl stop -m fast`, as `pg_ctlcluster ... stop`) and started
again during a burst of Slack mentions, each turn about a second at the model, with YOKEBOT_DB_OUTAGE_SECONDS
at its default. The proxy of tests/recovery/test_outage.py only drops sockets; a real stop is different: the
server ends every session with "terminating connection due to administrator command", then refuses
connections ("the database system is shutting down", then connection refused), then answers "the database
system is starting up" for a moment, and after it the server processes of before are gone (their pids free
for anyone). Before: some batches caught in that were taken for refused rows and committed one by one while the
server was still away, so a turn was apologised for although its model had answered, its row missing or left
`running`. Now every turn's rows are held through the outage and written after it, once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.chat.core.pipeline import SORRY
from bot.runner import serve
from tests.chat.slack_harness import OPS, mention
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, Step
from tests.fakes.pg_cluster import PgCluster
from tests.fakes.pgbouncer import PgBouncer, PooledUrl
from tests.fakes.slack_server import FakeSlack
from tests.helpers import db_rows, eventually, free_port, write_agent

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

MESSAGES = 24
SPACING = 0.25  # seconds between two mentions
STOP_AFTER = 12  # mentions before the stop; the rest of the burst meets the stopped server
OUTAGE_SECONDS = 12.0
MODEL_SECONDS = 1.5


@pytest.fixture(params=["direct", pytest.param("transaction", id="pgbouncer-transaction")])
def cluster_url(cluster: PgCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """The private cluster's URL, or one through a PgBouncer in transaction pooling in front of it (with the
    cluster's own as the direct URL): PgBouncer stays up while the server behind it stops and starts."""
    if request.param == "direct":
        yield cluster.url
        return
    pooler = PgBouncer("transaction", server_port=cluster.port).start()
    try:
        yield PooledUrl(pooler.url(), direct=cluster.url)
    finally:
        pooler.close()


async def test_a_postgresql_restart_during_a_burst_loses_no_turn_and_apologises_for_none(
        cluster: PgCluster, cluster_url: str, fake_slack: FakeSlack, fake_llm: FakeOpenAI, tmp_path: Path,
        caplog: pytest.LogCaptureFixture):
    agents = tmp_path / "agents"
    write_agent(agents, "ops", "description: ops\ntools: [current_time]")

    def answer(body: dict[str, Any]) -> Step:
        question = str(body["messages"][-1]["content"]).split("> ", 1)[-1]
        return Step("reply", content=f"answer: {question}", delay=MODEL_SECONDS)

    fake_llm.handler = answer
    settings = make_settings(cluster_url, fake_llm, agents, default_agent="ops", http_port=free_port(),
                             http_host="127.0.0.1", slack_api_url=fake_slack.api_url, scheduler_enabled=False,
                             slack_bot_token="xoxb-restart-test", slack_app_token="xapp-restart-test")
    assert settings.db_outage_seconds > OUTAGE_SECONDS + 10  # the default: the outage is to be waited out
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop))
    stamps = [fake_slack.next_ts() for _ in range(MESSAGES)]
    payloads = [mention(f"question {i}", ts) for i, ts in enumerate(stamps)]
    try:
        await eventually(lambda: fake_slack.connections >= 1, 30, "the Socket Mode connection")
        with caplog.at_level(logging.WARNING):
            envelopes = [fake_slack.push(payloads[0])]
            for payload in payloads[1:STOP_AFTER]:
                await asyncio.sleep(SPACING)
                envelopes.append(fake_slack.push(payload))
            # the server stops while the last turns are at the model: their rows meet it on the way out
            await eventually(lambda: len(fake_llm.requests) >= STOP_AFTER, 20, "the first turns at the model")
            await asyncio.to_thread(cluster.stop)
            for payload in payloads[STOP_AFTER:]:  # the burst goes on: these claims meet a stopped server
                await asyncio.sleep(SPACING)
                envelopes.append(fake_slack.push(payload))
            await asyncio.sleep(OUTAGE_SECONDS - SPACING * (MESSAGES - STOP_AFTER))
            await asyncio.to_thread(cluster.start)
            # as Slack does, a mention whose envelope got no ack comes again
            for payload, envelope in zip(payloads, envelopes, strict=True):
                if envelope not in fake_slack.acks:
                    fake_slack.push(payload, retry_attempt=1, retry_reason="http_timeout")
            await eventually(lambda: all(fake_slack.posts(channel=OPS, thread_ts=ts) for ts in stamps), 40,
                             "an answer in every thread")
            await asyncio.sleep(1.0)  # a second answer, or an apology, would have come by now
        posted = {ts: [c["text"] for c in fake_slack.posts(channel=OPS, thread_ts=ts)] for ts in stamps}
        assert posted == {ts: [f"answer: question {i}"] for i, ts in enumerate(stamps)}
        assert not any(SORRY in c["text"] for c in fake_slack.posts())
        assert "the database is unavailable" in caplog.text  # the outage was met by the writer
        refused = [r.getMessage() for r in caplog.records if "refused by the database" in r.getMessage()
                   or "committing them one by one" in r.getMessage()]
        assert refused == []
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=30)

    assert dict(await db_rows(cluster.url, "SELECT status, count(*) FROM turns GROUP BY status")) == {"ok": MESSAGES}
    assert dict(await db_rows(cluster.url, "SELECT state, count(*) FROM inbox GROUP BY state")) == {
        "answered": MESSAGES}
    [(calls,)] = await db_rows(cluster.url, "SELECT count(*) FROM llm_calls WHERE error IS NULL")
    [(messages,)] = await db_rows(cluster.url, "SELECT count(*) FROM messages")
    assert (calls, messages) == (MESSAGES, 2 * MESSAGES)

