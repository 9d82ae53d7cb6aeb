
"""How events reach the bot: exactly once in both modes (retries, duplicate event_ids, restarts, several
instances on one database), signed HTTP requests, and `yokebot run` starting Slack in either mode."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path

import aiohttp
import pytest

from bot.config import Settings
from bot.runner import serve
from tests.chat.slack_harness import (
    SECRET,
    answered,
    mention,
    start_bot,
)
from tests.conftest import make_settings, rows
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack, event_callback, sign
from tests.helpers import eventually, write_agent

MODES = ["socket", "http"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_retried_event_is_acknowledged_and_processed_once(
    mode: str, fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path
):
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents, mode=mode)
    try:
        assert bot.adapter.is_connected()  # /readyz: Socket Mode connection open, or the route mounted
        fake_llm.reply("once")
        payload = mention("hi", ts="1800.000100", channel="C_RANDOM", event_id="EvRETRY1")
        await bot.deliver(payload)
        await bot.deliver(payload, retry=1)  # Slack thought the first delivery failed
        await bot.deliver(payload, retry=2)
        await answered(fake_slack, "1800.000100")
        await bot.wait_acked(3)
        await bot.adapter.stop()
        assert not bot.adapter.is_connected()
    finally:
        await bot.stop()
    assert len(fake_llm.requests) == 1
    assert [p["text"] for p in fake_slack.posts("C_RANDOM")] == ["once"]
    if mode == "http":
        assert bot.http_statuses == [200, 200, 200]
    events = {kind: bot.app.metrics.value("yokebot_adapter_events_total", platform="slack", kind=kind)
              for kind in ("mention", "duplicate")}
    assert events == {"mention": 1, "duplicate": 2}


@pytest.mark.parametrize("mode", MODES)
async def test_a_duplicate_event_id_after_a_restart_is_not_processed_again(
    mode: str, fake_slack: FakeSlack, fake_llm: FakeOpenAI, db_url: str, slack_agents: Path
):
    payload = mention("hi", ts="1800.000200", channel="C_RANDOM", event_id="EvRESTART1")
    fake_llm.reply("first life")
    first = await start_bot(fake_slack, fake_llm, db_url, slack_agents, mode=mode)
    try:
        await first.deliver(payload)
        await answered(fake_slack, "1800.000200")
    finally:
        await first.stop()

    second = await start_bot(fake_slack, fake_llm, db_url, slack_agents, mode=mode)
    try:
        await second.deliver(payload)  # e.g. Socket Mode redelivers an unacked envelope to the new connection
        await second.wait_acked(2)
        await second.adapter.stop()
        turns = await rows(second.app, "SELECT id FROM turns")
    finally:
        await second.stop()
    assert len(fake_llm.requests) == 1 and len(turns) == 1
    assert [p["text"] for p in fake_slack.posts("C_RANDOM")] == ["first life"]


async def test_two_instances_on_one_database_answer_an_event_once(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, db_url: str, slack_agents: Path
):
    """Socket Mode with two connections: Slack may hand the same event to both; one of them answers."""
    fake_llm.reply("only one of us")
    one = await start_bot(fake_slack, fake_llm, db_url, slack_agents)
    two = await start_bot(fake_slack, fake_llm, db_url, slack_agents)
    try:
        one_envelope = mention("hi", ts="1800.000300", channel="C_RANDOM", event_id="EvTWICE")
        fake_slack.push(one_envelope)  # goes out on both connections
        await answered(fake_slack, "1800.000300")
        await eventually(lambda: len(fake_slack.acks) >= 2, what="both acks")
        await one.adapter.stop()
        await two.adapter.stop()
    finally:
        await one.stop()
        await two.stop()
    assert len(fake_llm.requests) == 1 and len(fake_slack.posts("C_RANDOM")) == 1


async def test_a_retry_of_an_event_never_taken_is_processed(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path
):
    """The first delivery was lost (say, the process died before claiming it): the retry is the only copy."""
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents)
    try:
        fake_llm.reply("not lost")
        await bot.deliver(mention("hi", ts="1800.000400", channel="C_RANDOM"), retry=1)
        await answered(fake_slack, "1800.000400")
    finally:
        await bot.stop()
    assert [p["text"] for p in fake_slack.posts("C_RANDOM")] == ["not lost"]


# --- HTTP Events mode: signatures ---------------------------------------------------------------------------
async def test_http_mode_checks_signatures_and_answers_url_verification(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path
):
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents, mode="http")
    try:
        challenge = {"token": "x", "challenge": "c-123", "type": "url_verification"}
        status, text = await bot.post(challenge)
        assert (status, json.loads(text)) == (200, {"challenge": "c-123"})
        assert (await bot.post(challenge, secret="wrong-secret"))[0] == 401
        payload = mention("hi", ts="1800.000500", channel="C_RANDOM")
        assert (await bot.post(payload, secret="wrong-secret"))[0] == 401
        assert (await bot.post(payload, timestamp=int(time.time()) - 600))[0] == 401  # replayed, stale
        async with aiohttp.ClientSession() as s, s.post(bot.events_url, data=json.dumps(payload)) as resp:
            assert resp.status == 401  # no signature at all
        await asyncio.sleep(0.2)
        assert fake_llm.requests == [] and fake_slack.posts() == []

        fake_llm.reply("signed and sound")
        started = time.monotonic()
        fake_llm.latency = 1.0
        assert (await bot.post(payload))[0] == 200
        assert time.monotonic() - started < 0.8  # acknowledged before the model answers
        await answered(fake_slack, "1800.000500")
    finally:
        await bot.stop()
    assert [p["text"] for p in fake_slack.posts("C_RANDOM")] == ["signed and sound"]


# --- `yokebot run` ------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def run_agents(tmp_path: Path) -> Path:
    agents = tmp_path / "run-agents"
    write_agent(agents, "tester", "tools: [current_time]")
    return agents


async def run_serve(settings: Settings) -> tuple[asyncio.Task[None], asyncio.Event]:
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop))
    return task, stop


async def test_yokebot_run_serves_slack_in_socket_mode(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, run_agents: Path
):
    settings = make_settings(
        sqlite_url,
        fake_llm,
        run_agents,
        http_port=free_port(),
        slack_bot_token="xoxb-run",
        slack_app_token="xapp-run",
        slack_api_url=fake_slack.api_url,
    )
    task, stop = await run_serve(settings)
    try:
        await eventually(
            lambda: fake_slack.connections == 1 or task.done(), what="the Socket Mode connection"
        )
        fake_llm.reply("running in Socket Mode")
        fake_slack.push(mention("hi", ts="1800.000600", channel="C_RANDOM"))
        await answered(fake_slack, "1800.000600")
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert [p["text"] for p in fake_slack.posts("C_RANDOM")] == ["running in Socket Mode"]


async def test_yokebot_run_serves_slack_events_over_http(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, run_agents: Path
):
    port = free_port()
    settings = make_settings(
        sqlite_url,
        fake_llm,
        run_agents,
        http_port=port,
        slack_bot_token="xoxb-run",
        slack_signing_secret=SECRET,
        slack_api_url=fake_slack.api_url,
    )
    task, stop = await run_serve(settings)
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(100):
                try:
                    async with session.get(f"{base}/healthz") as resp:
                        assert resp.status == 200
                        break
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.05)
            fake_llm.reply("running over HTTP")
            body = json.dumps(
                event_callback(
                    {
                        "type": "app_mention",
                        "user": "U_ALICE",
                        "text": "<@UBOT> hi",
                        "ts": "1800.000700",
                        "channel": "C_RANDOM",
                    }
                )
            )
            async with session.post(f"{base}/slack/events", data=body, headers=sign(SECRET, body)) as resp:
                assert resp.status == 200
        await answered(fake_slack, "1800.000700")
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert [p["text"] for p in fake_slack.posts("C_RANDOM")] == ["running over HTTP"]


async def test_yokebot_run_with_a_rejected_token_fails_in_one_sentence(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, run_agents: Path
):
    from bot.engine.errors import ConfigError

    fake_slack.fail("auth.test", error="invalid_auth")
    settings = make_settings(
        sqlite_url,
        fake_llm,
        run_agents,
        http_port=free_port(),
        slack_bot_token="xoxb-bad",
        slack_app_token="xapp-run",
        slack_api_url=fake_slack.api_url,
    )
    with pytest.raises(ConfigError, match=r"Slack rejected SLACK_BOT_TOKEN \(invalid_auth\)"):
        await serve(settings, asyncio.Event())
    with pytest.raises(ConfigError, match="neither SLACK_APP_TOKEN"):
        await serve(
            make_settings(sqlite_url, fake_llm, run_agents, slack_bot_token="xoxb-x"), asyncio.Event()
        )
