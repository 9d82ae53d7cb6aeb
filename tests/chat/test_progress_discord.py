"""Live progress on Discord, real discord.py against the fake Discord: typing while the turn runs, a status
message edited as the steps go, the answer edited as it is written, and the 2,000-character split at the end."""

from __future__ import annotations

from pathlib import Path

from tests.chat.test_discord import answered, start_bot
from tests.fakes.discord_server import DM_CHANNEL, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import eventually

ANSWER = ("**Degraded**: 3 upstream errors (502) since 10:00. I alerted #ops-alerts; the upstream answers "
          "again since 10:07 and nothing else is in the last hour.")
LIVE = {"model_stream": True, "progress_live": True, "progress_interval_seconds": 0.15}


async def test_a_three_step_turn_types_shows_its_steps_and_edits_the_answer_as_it_is_written(
    sqlite_url: str, fake_llm: FakeOpenAI, discord_agents: Path, fake_discord: FakeDiscord, log_dir: Path
):
    app, adapter = await start_bot(sqlite_url, fake_llm, discord_agents, fake_discord, **LIVE,
                                   progress_steps="full")
    try:
        log = str(log_dir / "error.log")
        fake_llm.calls(call("tail_log", {"path": log, "contains": "502"}), delay=0.3)
        fake_llm.calls(call("tail_log", {"path": log, "contains": "upstream"}), delay=0.3)
        fake_llm.calls(call("notify", {"message": "nginx: 502s since 10:00"}), delay=0.3)
        fake_llm.reply(ANSWER, chunk_delay=0.04)
        mid = fake_discord.mention("check the nginx error log")
        await eventually(lambda: answered(fake_discord, mid))
    finally:
        await adapter.stop()
        await app.close()
    assert mid in fake_discord.typing  # typing in the thread while the turn ran
    status, answer = fake_discord.posted_in(mid)  # in the thread opened on the message: two messages
    steps = fake_discord.shown(status.id)
    assert steps[0] == "_thinking…_"
    assert any(s.endswith("/nginx/error.log`…") for s in steps)
    assert "_writing the answer…_" in steps[-2]
    final_steps = steps[-1].splitlines()  # with `full` steps the status message stays as the steps and results
    assert len(final_steps) == 3 and all(" ✓ " in line for line in final_steps)
    assert final_steps[2].startswith("`notify nginx: 502s since 10:00` ✓")
    shown = fake_discord.shown(answer.id)
    assert len(shown) >= 3 and shown[-1] == ANSWER  # grew by edits, then the complete answer
    assert all(ANSWER.startswith(s) for s in shown[:-1])
    assert fake_discord.deleted == []


async def test_a_long_streamed_answer_is_split_at_2000_characters_and_a_429_loses_nothing(
    sqlite_url: str, fake_llm: FakeOpenAI, discord_agents: Path, fake_discord: FakeDiscord
):
    app, adapter = await start_bot(sqlite_url, fake_llm, discord_agents, fake_discord, **LIVE)
    long = "\n".join(f"line {i:03d}: upstream 10.0.0.7 answered 502 at 10:{i % 60:02d}" for i in range(90))
    try:
        fake_llm.reply(long, chunk_delay=0.004)
        fake_discord.rate_limit("PATCH", "", retry_after=0.3)  # the first edit is rate limited
        mid = fake_discord.dm("show me the 502s")
        await eventually(lambda: answered(fake_discord, mid), timeout=15)
    finally:
        await adapter.stop()
        await app.close()
    assert fake_discord.faults == []  # the 429 was served (and waited out by discord.py)
    posted = fake_discord.posted_in(DM_CHANNEL)
    assert posted[0].content == "_thinking…_"
    answer_id = posted[1].id
    parts = [fake_discord.shown(answer_id)[-1]] + [p.content for p in posted[2:]]
    assert all(len(p) <= 2000 for p in parts) and "\n".join(parts) == long  # complete, split on lines
    assert fake_discord.deleted == [(DM_CHANNEL, posted[0].id)]  # no steps: the status went away
