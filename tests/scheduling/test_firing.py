"""Real APScheduler on seconds-level schedules: runs through the engine, posts, and keeps history."""

from __future__ import annotations

from bot.scheduling.store import ScheduleStore
from tests.conftest import rows
from tests.fakes.openai_server import FakeOpenAI
from tests.scheduling.conftest import Harness, answer_every_time, eventually


async def test_a_profile_schedule_fires_runs_the_agent_and_posts_to_slack(harness: Harness, fake_llm: FakeOpenAI):
    answer_every_time(fake_llm, "All systems normal.")
    app, scheduler = await harness.start()
    assert scheduler.leader and list(scheduler.scheduled) == ["reporter/tick"]

    async def two_posts() -> bool:
        return len(harness.slack.posts) >= 2

    await eventually(two_posts, what="two scheduled posts")
    await harness.stop(scheduler)

    assert harness.slack.posts[:2] == [("#reports", "All systems normal.")] * 2
    runs = await ScheduleStore(app.engine).history("reporter/tick")
    done = [r for r in reversed(runs) if r.status == "ok"]
    assert len(done) >= 2
    first, second = done[0], done[1]
    assert (second.planned_at - first.planned_at).total_seconds() == 1.0
    assert first.kind == "scheduled" and first.posted_ref == "#reports/1" and first.error is None
    assert first.started_at is not None and first.finished_at is not None and first.started_at >= first.planned_at
    # each run went through AgentService with trigger=schedule, in its own session (per_run is the default)
    turns = await rows(app, "SELECT t.trigger, t.text, t.session_id, s.platform, s.channel FROM turns t "
                            "JOIN sessions s ON s.id = t.session_id ORDER BY t.started_at")
    assert {(t.trigger, t.text, t.platform, t.channel) for t in turns} == {
        ("schedule", "Write the status report.", "schedule", "reporter/tick")}
    assert first.session_id != second.session_id
    assert {t.session_id for t in turns} >= {first.session_id, second.session_id}
    # the model got the agent's system prompt and tools
    assert fake_llm.requests[0]["messages"][0]["content"].startswith("You write status reports.")
    assert {t["function"]["name"] for t in fake_llm.requests[0]["tools"]} == {"echo", "current_time"}
