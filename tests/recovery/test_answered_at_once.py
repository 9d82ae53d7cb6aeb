"""A message's inbox row is closed `answered` as soon as its answer is posted, not after the reply's last touches
(the reactions, the status message). Before, an instance killed in between (a few times in six kill -9 runs of
bench/scale_out.py with four instances) left the row open: the instance that took it over ran the turn again
and the thread got its answer twice."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.runner import serve
from tests.chat.slack_harness import OPS, mention
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.helpers import db_rows, eventually, free_port, write_agent


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
