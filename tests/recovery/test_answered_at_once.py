"""A message's inbox row is closed `answered` as soon as its answer is posted, not after the reply's last touches
(the reactions, the status message). Before, an instance killed in between (a few times in six kill -9 runs of
bench/scale_out.py with four instances) left the row open: the instance that took it over ran the turn again
and the thread got its answer twice."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bot.runner import serve
from tests.chat.slack_harness import OPS, mention
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, Step
from tests.fakes.slack_server import FakeSlack
from tests.helpers import db_rows, eventually, free_port, write_agent
from tests.recovery.harness import Bot, run_env, wait_until


async def test_the_row_is_answered_once_the_answer_is_out_before_the_reactions(
        db_url: str, fake_slack: FakeSlack, fake_llm: FakeOpenAI, tmp_path: Path):
    agents = tmp_path / "agents"
    write_agent(agents, "ops", "description: ops\ntools: [current_time]")
    fake_llm.reply("all good")
    settings = make_settings(db_url, fake_llm, agents, default_agent="ops", http_port=free_port(),
                             http_host="127.0.0.1", slack_api_url=fake_slack.api_url, scheduler_enabled=False,
                             slack_bot_token="xoxb-answered-test", slack_app_token="xapp-answered-test")
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop))
    try:
        await eventually(lambda: fake_slack.connections >= 1, 20, "the Socket Mode connection")
        fake_slack.hold("reactions.remove")  # the reply's last touches will hang: a crash could come then
        ts = fake_slack.next_ts()
        fake_slack.push(mention("is the api up?", ts))
        await eventually(lambda: fake_slack.posts(channel=OPS, thread_ts=ts), 10, "the answer")
        await eventually(lambda: fake_slack.calls_to("reactions.remove"), 10, "the reactions under way")

        async def closed() -> list[tuple[str]]:
            return [r for r in await db_rows(db_url, "SELECT state FROM inbox") if r[0] != "running"]

        # while the reactions hang, the row is settled: an instance killed now is not run again elsewhere
        assert await eventually(closed, 3, "the row closed while the reactions hang") == [("answered",)]
        assert ("reactions.add", "white_check_mark") not in fake_slack.reactions(ts)  # the reply is not done yet
        fake_slack.release("reactions.remove")
        await eventually(lambda: ("reactions.add", "white_check_mark") in fake_slack.reactions(ts), 10, "done")
    finally:
        fake_slack.release("reactions.remove")
        stop.set()
        await asyncio.wait_for(task, timeout=30)


def test_killed_after_posting_its_answer_before_closing_the_row_the_restart_does_not_answer_again(
        tmp_path: Path, db_url: str, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    """The last window: Slack has the answer (it is in the thread) but its reply had not reached the bot when
    the bot was killed, so the row was still `running`. The instance that takes it over finds the turn's answer
    in the thread and closes the row instead of running the turn again (before: a second answer, seen in
    bench/scale_out.py's kill -9 runs)."""
    fake_llm.handler = lambda _body: Step("reply", content="The api is up: 3 of 3 pods ready.")
    env = run_env(tmp_path, db_url, fake_slack, fake_llm)
    fake_slack.hold("chat.postMessage")  # posted in the thread, answered late: the bot dies waiting
    first = Bot(env, tmp_path, "first")
    ts = fake_slack.next_ts()
    try:
        wait_until(lambda: fake_slack.connections >= 1, 20, "the Socket Mode connection", first)
        fake_slack.push(mention("is the api up?", ts))
        wait_until(lambda: fake_slack.posts(channel=OPS, thread_ts=ts), 15, "the answer in the thread", first)
    finally:
        first.kill9()
        fake_slack.release("chat.postMessage")
    second = Bot(env, tmp_path, "second")
    try:
        rows = lambda: asyncio.run(db_rows(db_url, "SELECT state, note FROM inbox"))  # noqa: E731
        wait_until(lambda: rows()[0][0] != "running", 30, "the row taken over and closed", second)
        time.sleep(0.5)  # a second answer would have come by now
    finally:
        assert second.stop() == 0, second.output()[-3000:]
    assert [c["text"] for c in fake_slack.posts(channel=OPS, thread_ts=ts)] == ["The api is up: 3 of 3 pods ready."]
    assert rows() == [("answered", "answered before the restart, not answered again")]
    assert len(fake_llm.requests) == 1
