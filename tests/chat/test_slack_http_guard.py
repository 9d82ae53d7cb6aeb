"""Correctly signed `/slack/events` bodies that are no Slack payload get 400 with one sentence (Bolt's body
parser raised on them, and aiohttp answered 500)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import aiohttp
import pytest

from tests.chat.slack_harness import SECRET, mention, start_bot
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack, sign

BAD = [
    ("application/json", "{not json", "the body is not valid JSON"),
    ("application/json", "[1, 2]", "the body is JSON but not an object"),
    ("application/x-www-form-urlencoded", "payload=" + quote("not json"), "the payload field is not valid JSON"),
    ("application/x-www-form-urlencoded", "payload=" + quote("[]"), "the payload field is JSON but not an object"),
]


@pytest.fixture
async def http_bot(fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, slack_agents: Path):
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, slack_agents, mode="http")
    yield bot
    await bot.stop()


async def test_signed_bodies_that_are_no_slack_payload_get_400(http_bot, fake_llm: FakeOpenAI):
    async with aiohttp.ClientSession() as session:
        for content_type, body, problem in BAD:
            headers = {**sign(SECRET, body), "Content-Type": content_type}
            async with session.post(http_bot.events_url, data=body, headers=headers) as resp:
                assert (resp.status, (await resp.text()).strip()) == (400, f"Not a Slack event: {problem}."), body
    # a good body still goes through Bolt: its signature is checked, the challenge answered
    challenge = {"token": "x", "challenge": "c-1", "type": "url_verification"}
    status, text = await http_bot.post(challenge)
    assert (status, json.loads(text)) == (200, {"challenge": "c-1"})
    assert (await http_bot.post(mention("hi", ts="1.0"), secret="wrong"))[0] == 401
    assert fake_llm.requests == []
