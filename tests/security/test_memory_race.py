"""`remember` under parallel tool calls: one model reply with several `remember` calls runs them at once, and
the channel's bound (`max_items`: a full channel drops its least recalled, oldest fact) and the no-duplicates rule
still hold, on SQLite and PostgreSQL (the check, the INSERT and the drop are one transaction under a per-channel
lock). Through the real openai SDK against the fake."""

from __future__ import annotations

from pathlib import Path

from bot.app import App, load_profiles
from bot.engine.service import TurnRequest
from tests.conftest import rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import tool_messages, write_agent

AGENT = """
tools:
  remember: {max_items: 3}
max_iterations: 3
"""


def req(text: str) -> TurnRequest:
    return TurnRequest(platform="test", channel="c1", thread="t1", text=text, agent="tester", user="U_ALICE")


async def facts(app: App) -> list[str]:
    return [r.content for r in await rows(app, "SELECT content FROM memories ORDER BY id")]


async def test_four_parallel_remembers_with_room_for_three_keep_the_last_three(
    any_bot: App, fake_llm: FakeOpenAI, agents_dir: Path
):
    write_agent(agents_dir, "tester", AGENT)
    any_bot.profiles.update(load_profiles(any_bot.settings, any_bot.registry))
    fake_llm.calls(*(call("remember", {"fact": f"host web{i} is flaky"}, f"c{i}") for i in range(4)))
    fake_llm.reply("Noted.")
    await any_bot.service.handle(req("remember these four hosts"))
    assert await facts(any_bot) == ["host web1 is flaky", "host web2 is flaky", "host web3 is flaky"]
    results = [m["content"] for m in tool_messages(fake_llm.requests[1])]
    assert len(results) == 4 and all(r.startswith("Remembered as") for r in results)
    assert results[3].endswith("Memory for this channel was full (3 facts), so the least recalled, oldest fact "
                               "was dropped: [1] host web0 is flaky")


async def test_three_identical_parallel_remembers_store_one(any_bot: App, fake_llm: FakeOpenAI, agents_dir: Path):
    write_agent(agents_dir, "tester", AGENT)
    any_bot.profiles.update(load_profiles(any_bot.settings, any_bot.registry))
    fake_llm.calls(*(call("remember", {"fact": "web3 is flaky on Mondays"}, f"c{i}") for i in range(3)))
    fake_llm.reply("Noted.")
    await any_bot.service.handle(req("remember it"))
    assert await facts(any_bot) == ["web3 is flaky on Mondays"]
    results = [m["content"] for m in tool_messages(fake_llm.requests[1])]
    assert sum(r.startswith("Remembered as") for r in results) == 1
    assert sum(r.startswith("Already remembered as") for r in results) == 2


async def test_two_instances_cannot_overfill_a_channel_or_store_a_fact_twice(any_bot: App):
    """Each store has its own in-process locks (two instances): the database-side guard alone holds."""
    import asyncio

    from bot.store.repositories import SqlStore

    stores = [SqlStore(any_bot.engine).memory for _ in range(4)]
    done = await asyncio.gather(*(s.remember("tester", "c1", f"fact {i}", None, 3) for i, s in enumerate(stores)),
                                *(s.remember("tester", "c2", "same", None, 3) for s in stores))
    assert all(d.new for d in done[:4]) and sum(d.dropped is not None for d in done[:4]) == 1
    assert sum(d.new for d in done[4:]) == 1 and len({d.id for d in done[4:]}) == 1
    assert len(await facts(any_bot)) == 4  # three in c1, one in c2
