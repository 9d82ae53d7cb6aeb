"""The one inbound pipeline through the real platform libraries: the same `access:` block gives the same
answers on Slack (Bolt over Socket Mode) and Discord (discord.py over the gateway); Discord now has the
concurrency cap and the shutdown notice Slack had; the console runs its turns through the same pipeline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from rich.console import Console

from bot.app import build_app
from bot.chat.console.adapter import ConsoleAdapter
from bot.chat.core.pipeline import SORRY, STOPPED
from tests.chat.slack_harness import ALICE as SLACK_ALICE
from tests.chat.slack_harness import MALLORY, OPS, mention, message, start_bot
from tests.chat.test_discord import start_bot as start_discord
from tests.conftest import make_settings
from tests.fakes.discord_server import BOB, CAROL, DM_CHANNEL, GENERAL, ONCALL_ROLE, OTHER, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, Step
from tests.fakes.slack_server import FakeSlack
from tests.helpers import eventually, registry, write_agent

REFUSED = "Sorry, you don't have access to me here."

# One block for both platforms: the on-call group (Slack user group, Discord role), one person by ID, and one
# channel on each platform. No `dm` in channels, so DMs are refused everywhere.
GUARDED = f"""
access:
  roles: ["slack:S_ONCALL", "discord:{ONCALL_ROLE}"]
  users: ["slack:U_BOB", "discord:{BOB}"]
  channels: ["slack:{OPS}", "discord:{GENERAL}"]
"""

CASES = ["on-call group in the channel", "listed user in the channel", "nobody in the channel",
         "on-call group elsewhere", "on-call group in a DM"]
EXPECTED = ["answered", "answered", "refused", "refused", "refused"]


def outcome(text: str) -> str:
    return "refused" if text.startswith(REFUSED) else "answered"


async def outcomes(send: Callable[[int], Awaitable[None]], texts: Callable[[], list[str]]) -> list[str]:
    seen: list[str] = []
    for i in range(len(CASES)):
        before = len(texts())
        await send(i)
        await eventually(lambda before=before: len(texts()) > before, what=CASES[i])
        seen.append(outcome(texts()[-1]))
    return seen


async def test_the_same_access_block_gives_the_same_answers_on_slack_and_discord(
    fake_slack: FakeSlack, fake_discord: FakeDiscord, fake_llm: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    for name in ("tester", "ops"):  # the default agent of the Slack and of the Discord harness
        write_agent(agents_dir, name, "tools: [echo]\n" + GUARDED)
    fake_llm.handler = lambda body: Step("reply", content="ok")
    slack = await start_bot(fake_slack, fake_llm, sqlite_url, agents_dir)
    slack_events = [
        mention("hi", ts="1800.000001", user=SLACK_ALICE),
        mention("hi", ts="1800.000002", user="U_BOB"),
        mention("hi", ts="1800.000003", user=MALLORY),
        mention("hi", ts="1800.000004", user=SLACK_ALICE, channel="C_RANDOM"),
        message("hi", "1800.000005", "D_ALICE", user=SLACK_ALICE),
    ]
    try:
        on_slack = await outcomes(lambda i: slack.deliver(slack_events[i]),
                                  lambda: [p["text"] for p in fake_slack.posts()])
    finally:
        await slack.stop()
    app, discord_bot = await start_discord(sqlite_url, fake_llm, agents_dir, fake_discord)
    discord_sends = [
        lambda: fake_discord.mention("hi"),
        lambda: fake_discord.mention("hi", author=BOB),
        lambda: fake_discord.mention("hi", author=CAROL),
        lambda: fake_discord.mention("hi", channel=OTHER),
        lambda: fake_discord.dm("hi"),
    ]

    async def send_discord(i: int) -> None:
        discord_sends[i]()

    try:
        on_discord = await outcomes(send_discord, lambda: [p.content for p in fake_discord.posted])
    finally:
        await discord_bot.stop()
        await app.close()
    assert on_slack == EXPECTED, dict(zip(CASES, on_slack, strict=True))
    assert on_discord == EXPECTED, dict(zip(CASES, on_discord, strict=True))
    assert len(fake_llm.requests) == 4  # refusals never reach the model
    assert fake_slack.calls_to("usergroups.list")  # Slack looked the groups up (Discord reads roles)


async def test_discord_turns_wait_for_a_free_slot(
    sqlite_url: str, fake_llm: FakeOpenAI, discord_agents: Path, fake_discord: FakeDiscord
):
    arrivals: list[float] = []

    def handler(body: dict) -> Step:
        arrivals.append(time.monotonic())
        return Step("reply", content="done")

    fake_llm.handler, fake_llm.latency = handler, 0.4
    app, adapter = await start_discord(sqlite_url, fake_llm, discord_agents, fake_discord,
                                       discord_max_concurrent_turns=1)
    try:
        first, second = fake_discord.mention("one"), fake_discord.mention("two")  # two threads, two sessions
        await eventually(lambda: len(fake_discord.reactions) == 2)
    finally:
        await adapter.stop()
        await app.close()
    assert sorted(m for _, m, _ in fake_discord.reactions) == sorted([first, second])
    assert arrivals[1] - arrivals[0] >= 0.35  # the second turn started when the first had finished


async def test_discord_stop_mid_turn_tells_the_user_instead_of_leaving_them_waiting(
    sqlite_url: str, fake_llm: FakeOpenAI, discord_agents: Path, fake_discord: FakeDiscord
):
    app, adapter = await start_discord(sqlite_url, fake_llm, discord_agents, fake_discord,
                                       discord_drain_seconds=0.2)
    fake_llm.hang(1.0)  # longer than the drain
    mid = fake_discord.dm("slow one")
    await eventually(lambda: fake_llm.requests, what="the model call")
    await adapter.stop()
    assert adapter.busy == 0
    await app.close()
    assert [p.content for p in fake_discord.posted_in(DM_CHANNEL)] == [STOPPED]
    assert fake_discord.reactions == [(DM_CHANNEL, mid, "❌")]


async def test_discord_answers_a_message_arriving_while_stopping_never(
    sqlite_url: str, fake_llm: FakeOpenAI, discord_agents: Path, fake_discord: FakeDiscord
):
    app, adapter = await start_discord(sqlite_url, fake_llm, discord_agents, fake_discord)
    adapter.pipeline.close()  # the first thing stop() does
    fake_discord.dm("too late")
    await asyncio.sleep(0.3)
    await adapter.stop()
    await app.close()
    assert fake_discord.posted == [] and fake_llm.requests == []


async def test_the_console_runs_through_the_pipeline_and_fails_in_one_sentence(
    fake_llm: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    write_agent(agents_dir, "tester", "tools: [echo]\naccess:\n  users: [U_SOMEONE_ELSE]\n")
    app = await build_app(make_settings(sqlite_url, fake_llm, agents_dir), registry=registry())
    out = Console(record=True, width=100)
    console = ConsoleAdapter(app.service, "tester", out)
    try:
        fake_llm.reply("**hello** from the terminal")
        result = await console.turn("hi")  # the operator on the host: no access lists
        assert result is not None and result.answer == "**hello** from the terminal"
        console.pipeline.service = None  # type: ignore[assignment]  # the turn now raises inside the pipeline
        assert await console.turn("again") is None
    finally:
        await app.close()
    printed = out.export_text()
    assert "**hello** from the terminal" in printed and SORRY in " ".join(printed.split())
