"""Real APScheduler on seconds-level schedules: runs through the engine, posts, and keeps history."""

from __future__ import annotations

from bot.scheduling.store import ScheduleStore
from tests.conftest import rows
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import eventually
from tests.scheduling.conftest import Harness, answer_every_time


async def test_a_profile_schedule_fires_runs_the_agent_and_posts_to_slack(
    harness: Harness, fake_llm: FakeOpenAI
):
    answer_every_time(fake_llm, "All systems normal.")
    app, scheduler = await harness.start()
    assert scheduler.leader and list(scheduler.scheduled) == ["reporter/tick"]

    async def scheduled_runs() -> list:  # a slow start may add a catch-up run first: the tick planned meanwhile
        runs = await ScheduleStore(app.engine).history("reporter/tick")
        return [r for r in reversed(runs) if r.status == "ok" and r.kind == "scheduled"]

    async def two_runs() -> bool:
        return len(await scheduled_runs()) >= 2

    await eventually(two_runs, what="two scheduled runs")
    await harness.stop(scheduler)

    assert harness.slack.posts[:2] == [("#reports", "All systems normal.")] * 2
    first, second = (await scheduled_runs())[:2]
    assert (second.planned_at - first.planned_at).total_seconds() == 1.0
    assert first.posted_ref in {f"#reports/{n}" for n in range(1, len(harness.slack.posts) + 1)}
    assert first.error is None
    assert (
        first.started_at is not None
        and first.finished_at is not None
        and first.started_at >= first.planned_at
    )
    # each run went through AgentService with trigger=schedule, in its own session (per_run is the default)
    turns = await rows(
        app,
        "SELECT t.trigger, t.text, t.session_id, s.platform, s.channel FROM turns t "
        "JOIN sessions s ON s.id = t.session_id ORDER BY t.started_at",
    )
    assert {(t.trigger, t.text, t.platform, t.channel) for t in turns} == {
        ("schedule", "Write the status report.", "schedule", "reporter/tick")
    }
    assert first.session_id != second.session_id
    assert {t.session_id for t in turns} >= {first.session_id, second.session_id}
    # the model got the agent's system prompt and tools
    assert fake_llm.requests[0]["messages"][0]["content"].startswith("You write status reports.")
    assert {t["function"]["name"] for t in fake_llm.requests[0]["tools"]} == {"echo", "current_time"}


async def test_a_failing_run_posts_a_short_notice_and_keeps_the_error(harness: Harness, fake_llm: FakeOpenAI):
    fake_llm.fail(400, code="invalid_request_error", message="model does not exist")  # not retried
    answer_every_time(fake_llm, "Back to normal.")
    app, scheduler = await harness.start()

    async def notice_and_report() -> bool:
        return len(harness.slack.posts) >= 2

    await eventually(notice_and_report, what="a failure notice and the next report")
    await harness.stop(scheduler)

    (channel, notice), (_, report) = harness.slack.posts[:2]
    assert channel == "#reports"
    assert notice.startswith("Scheduled report reporter/tick failed: ") and "model does not exist" in notice
    assert "yokebot schedule history reporter/tick" in notice
    assert report == "Back to normal."
    runs = list(reversed(await ScheduleStore(app.engine).history("reporter/tick")))
    assert runs[0].status == "failed" and "model does not exist" in (runs[0].error or "")
    assert runs[0].posted_ref == "#reports/1" and runs[0].session_id is not None
    assert runs[1].status == "ok" and runs[1].error is None
    turn = (await rows(app, "SELECT status, error FROM turns WHERE session_id = :s", s=runs[0].session_id))[0]
    assert turn.status == "error"


async def test_a_post_that_fails_is_a_failed_run_with_the_reason(harness: Harness, fake_llm: FakeOpenAI):
    answer_every_time(fake_llm)
    harness.slack.fail = True
    app, scheduler = await harness.start()
    store = ScheduleStore(app.engine)

    async def a_finished_run() -> bool:
        return any(r.status != "running" for r in await store.history("reporter/tick"))

    await eventually(a_finished_run, what="a finished run")
    await harness.stop(scheduler)
    run = [r for r in await store.history("reporter/tick") if r.status != "running"][-1]
    assert run.status == "failed" and run.posted_ref is None
    assert run.error == "posting to slack:#reports failed: channel_not_found"


async def test_without_the_platform_configured_the_report_goes_to_the_log(
    harness: Harness, fake_llm: FakeOpenAI, caplog
):
    answer_every_time(fake_llm, "Quiet night.")
    caplog.set_level("INFO", logger="bot.scheduling.runs")
    app = await harness.app()
    app.notifier.adapters.clear()  # no Slack in this process
    from bot.scheduling.setup import build_scheduler

    scheduler = await build_scheduler(app)
    await scheduler.start()
    harness.schedulers.append(scheduler)
    store = ScheduleStore(app.engine)

    async def an_ok_run() -> bool:
        return any(r.status == "ok" for r in await store.history("reporter/tick"))

    await eventually(an_ok_run, what="a run")
    await harness.stop(scheduler)
    run = next(r for r in await store.history("reporter/tick") if r.status == "ok")
    assert run.posted_ref == "log"
    assert any(
        "slack is not configured in this process" in r.message and "Quiet night." in r.message
        for r in caplog.records
    )


async def test_a_rolling_schedule_keeps_one_session_with_its_history(
    harness: Harness, fake_llm: FakeOpenAI, sched_agents
):
    from tests.helpers import write_agent

    write_agent(
        sched_agents,
        "reporter",
        """
tools: [echo]
schedules:
  - {name: tick, every: 1s, prompt: "What changed?", post_to: "slack:#reports", session: rolling}
""",
        body="You write status reports.",
    )
    answer_every_time(fake_llm, "Nothing new.")
    app, scheduler = await harness.start()

    async def two_posts() -> bool:
        return len(harness.slack.posts) >= 2

    await eventually(two_posts, what="two posts")
    await harness.stop(scheduler)
    runs = [r for r in await ScheduleStore(app.engine).history("reporter/tick") if r.status == "ok"]
    assert len({r.session_id for r in runs}) == 1
    # the second run saw the first run's question and answer
    second = fake_llm.requests[1]["messages"]
    assert [m["role"] for m in second[1:]] == ["user", "assistant", "user"]
