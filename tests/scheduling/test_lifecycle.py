"""Schedules across restarts: profile re-sync, runtime schedules kept in the database, live pause and
add, catch-up after downtime (once), too-late runs recorded as missed, unfinished runs abandoned."""

from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from bot.scheduling.model import Schedule, utcnow
from bot.scheduling.setup import synced_store
from bot.scheduling.store import ScheduleStore
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import eventually, write_agent
from tests.scheduling.conftest import Harness, answer_every_time


def profile(*schedules: str) -> str:
    return "tools: [echo]\nschedules:\n" + "\n".join(f"  - {s}" for s in schedules)


async def test_a_changed_profile_is_re_synced_at_start_up(harness: Harness, sched_agents: Path):
    write_agent(
        sched_agents,
        "reporter",
        profile(
            '{name: tick, every: 1h, prompt: "p1"}',
            '{name: daily, cron: "0 6 * * *", prompt: "daily"}',
            '{name: weekly, cron: "0 6 * * 1", prompt: "weekly", post_to: "slack:#x"}',
        ),
    )
    app, scheduler = await harness.start()
    assert sorted(scheduler.scheduled) == ["reporter/daily", "reporter/tick", "reporter/weekly"]
    await ScheduleStore(app.engine).set_paused("weekly", True)  # a pause survives a profile change
    await harness.stop(scheduler)

    write_agent(
        sched_agents,
        "reporter",
        profile(
            '{name: tick, every: 2h, prompt: "p2"}',
            '{name: weekly, cron: "0 7 * * 1", prompt: "weekly", post_to: "slack:#x"}',
            '{name: fresh, every: 5m, prompt: "new one"}',
            '{name: later, every: 5m, prompt: "not yet", enabled: false}',
        ),
    )
    app, scheduler = await harness.start()
    assert sorted(scheduler.scheduled) == ["reporter/fresh", "reporter/tick"]
    assert scheduler.scheduled["reporter/tick"].every == "2h"
    assert scheduler.scheduled["reporter/tick"].prompt == "p2"
    stored = {s.name: s for s in await ScheduleStore(app.engine).all()}
    assert sorted(stored) == ["reporter/fresh", "reporter/later", "reporter/tick", "reporter/weekly"]
    assert stored["reporter/weekly"].paused and stored["reporter/weekly"].cron == "0 7 * * 1"
    assert stored["reporter/later"].state == "disabled"


async def test_a_runtime_schedule_is_picked_up_live_and_survives_a_restart(
    harness: Harness, fake_llm: FakeOpenAI, sched_agents: Path
):
    write_agent(sched_agents, "reporter", profile('{name: tick, every: 1h, prompt: "p"}'))
    answer_every_time(fake_llm, "ops report")
    app, scheduler = await harness.start()
    store = ScheduleStore(app.engine)
    await store.add(
        Schedule(
            name="ops-check",
            agent="reporter",
            source="runtime",
            prompt="check ops",
            every="1s",
            post_to="slack:#ops",
        )
    )

    async def posted_to_ops() -> bool:
        return ("#ops", "ops report") in harness.slack.posts

    await eventually(posted_to_ops, what="the runtime schedule to post (picked up by a refresh)")
    await harness.stop(scheduler)
    harness.slack.posts.clear()

    app, scheduler = await harness.start()  # a restart: new app, same database
    assert "ops-check" in scheduler.scheduled
    await eventually(posted_to_ops, what="the runtime schedule to post after the restart")

    await ScheduleStore(app.engine).set_paused("ops-check", True)

    async def unscheduled() -> bool:
        return "ops-check" not in scheduler.scheduled

    await eventually(unscheduled, what="the pause to reach the running scheduler")
    await asyncio.sleep(0.3)  # a run already started may still finish
    count = len(harness.slack.posts)
    await asyncio.sleep(1.5)
    assert len(harness.slack.posts) == count


async def test_after_downtime_exactly_one_catch_up_run_and_the_rest_missed(
    harness: Harness, fake_llm: FakeOpenAI
):
    answer_every_time(fake_llm)
    app, scheduler = await harness.start(schedule_misfire_grace_seconds=30)
    store = ScheduleStore(app.engine)

    async def one_ok() -> bool:
        return any(r.status == "ok" for r in await store.history("reporter/tick"))

    await eventually(one_ok, what="a first run")
    await harness.stop(scheduler)
    # the first start may itself have caught up a tick that passed while it started: only what the restart
    # does is looked at below
    before = {r.id for r in await store.history("reporter/tick", limit=100)}
    posted_before = len([p for p in harness.slack.posts if p[0] == "#reports"])
    await asyncio.sleep(3.2)  # downtime: about three planned times pass with no scheduler

    app, scheduler = await harness.start(schedule_misfire_grace_seconds=30)
    await asyncio.sleep(0.3)
    await harness.stop(scheduler)

    runs = [r for r in reversed(await ScheduleStore(app.engine).history("reporter/tick", limit=100))
            if r.id not in before]
    catch_ups = [r for r in runs if r.kind == "catch_up"]
    assert len(catch_ups) == 1 and catch_ups[0].status == "ok"
    missed = [r for r in runs if r.status == "missed"]
    assert len(missed) >= 2
    assert all(r.planned_at < catch_ups[0].planned_at for r in missed)
    assert all("one catch-up run at" in (r.error or "") for r in missed)
    # /metrics of the restarted bot: its catch-up run and the missed times it recorded
    assert app.metrics.value("yokebot_schedule_runs_total", schedule="reporter/tick", status="missed") == len(missed)
    assert app.metrics.value("yokebot_schedule_runs_total", schedule="reporter/tick", status="ok") >= 1
    # every planned time on the one-second grid has exactly one row: nothing dropped, nothing doubled
    planned = [r.planned_at for r in runs]
    assert planned == sorted(planned)
    assert [(b - a).total_seconds() for a, b in itertools.pairwise(planned)] == [1.0] * (len(planned) - 1)
    assert len([p for p in harness.slack.posts if p[0] == "#reports"]) - posted_before == len(
        [r for r in runs if r.status == "ok"]
    )


@pytest.mark.parametrize(("grace", "caught_up"), [(10, False), (90, True)])
async def test_runs_past_the_grace_time_are_recorded_as_missed_not_run(
    harness: Harness, fake_llm: FakeOpenAI, sched_agents: Path, grace: int, caught_up: bool
):
    write_agent(sched_agents, "reporter", profile('{name: tick, every: 1h, prompt: "p"}'))
    answer_every_time(fake_llm, "late report")
    app = await harness.app()
    store = ScheduleStore(app.engine)
    await store.add(
        Schedule(
            name="minutely", agent="reporter", source="runtime", prompt="p", every="1m", post_to="slack:#ops"
        )
    )
    # the schedule was created 10m30s ago and nothing ran since: planned times were -9m30s ... -30s
    created = (utcnow() - timedelta(minutes=10, seconds=30)).replace(microsecond=0)
    async with app.engine.begin() as conn:
        await conn.execute(
            text("UPDATE schedules SET created_at = :c, updated_at = :c WHERE name = 'minutely'"),
            {"c": created},
        )

    app, _scheduler = await harness.start(schedule_misfire_grace_seconds=grace)

    async def settled() -> bool:
        return all(r.status != "running" for r in await store.history("minutely", limit=100))

    await asyncio.sleep(0.2)
    await eventually(settled, what="the catch-up to finish")
    runs = await ScheduleStore(app.engine).history("minutely", limit=100)
    assert [r.planned_at for r in reversed(runs)] == [created + timedelta(minutes=m) for m in range(1, 11)]
    statuses = [r.status for r in reversed(runs)]
    if caught_up:
        assert statuses == ["missed"] * 9 + ["ok"] and runs[0].kind == "catch_up"
        assert harness.slack.posts == [("#ops", "late report")]
    else:
        assert statuses == ["missed"] * 10
        assert "past the 10s grace time" in (runs[0].error or "")
        assert harness.slack.posts == []


async def test_a_run_left_running_by_a_dead_scheduler_is_marked_abandoned(
    harness: Harness, sched_agents: Path
):
    write_agent(sched_agents, "reporter", profile('{name: tick, every: 1h, prompt: "p"}'))
    app = await harness.app()
    store, _ = await synced_store(app)
    tick = await store.resolve("tick")
    dead = await store.claim(tick, utcnow() - timedelta(minutes=5), "scheduled", "gone-host:1")
    manual = await store.claim(
        tick, utcnow(), "manual", "cli-host:2"
    )  # a `schedule run` elsewhere: left alone
    _, scheduler = await harness.start()
    by_id = {r.id: r for r in await store.history("reporter/tick")}
    assert by_id[dead].status == "abandoned" and "not retried" in (by_id[dead].error or "")
    assert by_id[manual].status == "running"
    assert scheduler.leader


async def test_a_planned_time_during_a_long_run_is_recorded_not_dropped(
    harness: Harness, fake_llm: FakeOpenAI
):
    answer_every_time(fake_llm, "slow report")
    fake_llm.latency = 1.6  # each run outlasts the one-second interval
    app, scheduler = await harness.start()
    store = ScheduleStore(app.engine)

    async def a_skip() -> bool:
        return any(
            r.error == "the previous run was still going" for r in await store.history("reporter/tick")
        )

    await eventually(a_skip, what="a planned time skipped during a long run")
    await harness.stop(scheduler)  # lets the run in flight finish and post (the drain), then stops
    runs = await store.history("reporter/tick")
    assert runs and all(r.status in ("ok", "missed") for r in runs)
    assert len(harness.slack.posts) == sum(r.status == "ok" for r in runs)
