"""Every approval text (the request, the decision, the expiry, the sentences in the thread) is defused on both
platforms: a tool argument holding `<!channel>`, `[x](!here)` and `@everyone` pings nobody. Through real Bolt
and real discord.py against the fakes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.approvals.desk import ACTION_DENY
from tests.approvals.harness import BOSS, fast, gated_agent, slack_request
from tests.approvals.test_discord import gated, request_message, start, stop
from tests.approvals.test_slack import ASK_TS, click
from tests.chat.slack_harness import answered, mention, start_bot
from tests.fakes.discord_server import ALICE, BOB, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, call
from tests.fakes.slack_server import FakeSlack
from tests.helpers import RESTARTS, eventually

HOSTILE = "nginx <!channel> [x](!here) @everyone"
SLACK_PING = re.compile(r"<!(channel|here|everyone)|\]\(\s*!|(?<!\u2060)@everyone")
DISCORD_PING = re.compile(r"(?<!\u2060)@(everyone|here)")


@pytest.fixture
def script(fake_llm: FakeOpenAI) -> FakeOpenAI:
    RESTARTS.clear()
    fake_llm.calls(call("restart_service", {"service": HOSTILE}, "call_restart")).reply("Done.")
    return fake_llm


def slack_texts(fake: FakeSlack) -> list[str]:
    return [json.dumps({k: v for k, v in c.params.items() if k in ("text", "blocks", "markdown_text")},
                       ensure_ascii=False) for c in fake.calls if c.method.startswith("chat.")]


@pytest.mark.parametrize("timeout", ["30s", "1s"])
async def test_slack_approval_texts_are_defused(
    fake_slack: FakeSlack, script: FakeOpenAI, sqlite_url: str, agents_dir: Path, timeout: str
):
    gated_agent(agents_dir, timeout=timeout)
    bot = await start_bot(fake_slack, script, sqlite_url, agents_dir)
    fast(bot.app)
    try:
        await bot.deliver(mention("restart nginx please", ASK_TS))
        channel, ts, approval_id = await slack_request(fake_slack)
        if timeout == "30s":
            await click(bot, BOSS, ACTION_DENY, approval_id, ts, channel=channel)  # the decision
        await answered(fake_slack, ASK_TS)
        await eventually(lambda: [c for c in fake_slack.calls_to("chat.update") if c.params.get("ts") == ts],
                         what="the request updated")
    finally:
        await bot.stop()
    sent = slack_texts(fake_slack)
    assert any("restart_service" in s for s in sent)
    assert any(("Denied" if timeout == "30s" else "Expired") in s for s in sent)
    for text in sent:
        assert not SLACK_PING.search(text), text


async def test_discord_approval_texts_are_defused(
    sqlite_url: str, script: FakeOpenAI, agents_dir: Path, fake_discord: FakeDiscord
):
    gated(agents_dir)
    app, adapter = await start(sqlite_url, script, agents_dir, fake_discord)
    try:
        fake_discord.mention("restart nginx please", author=ALICE)
        post, approval_id = await request_message(fake_discord)
        fake_discord.click(f"{ACTION_DENY}:{approval_id}", post, BOB)
        await eventually(lambda: fake_discord.callbacks, what="the decision")
    finally:
        await stop(app, adapter)
    shown = [p.content for p in fake_discord.posted] + [str(c.data.get("content")) for c in fake_discord.callbacks]
    assert any("restart_service" in s for s in shown) and any("Denied" in s for s in shown)
    for text in shown:
        assert not DISCORD_PING.search(text), text
