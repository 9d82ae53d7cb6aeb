"""Issue 25: a turn waiting for an approval is parked, not a task: it holds no concurrency slot while it waits
(nine pending requests with the cap at 8 do not delay a question in another thread), a later message of its
thread is told it waits, and a click on a request whose turn is truly gone tells the thread and the clicker.
Real Bolt against the fake Slack, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from bot.approvals.desk import ACTION_APPROVE
from bot.scheduling.setup import schedule_runner, synced_store
from bot.store.models import utcnow
from tests.approvals.harness import BOSS, approval_rows, fast, gated_agent, slack_request, tool_rows
from tests.approvals.test_slack import click
from tests.chat.slack_harness import OPS, answered, mention, start_bot
from tests.conftest import rows
from tests.fakes.openai_server import FakeOpenAI, Step, call
from tests.fakes.otlp_server import FakeOtlp
from tests.fakes.slack_server import FakeSlack
from tests.helpers import RESTARTS, eventually, tool_messages, unwrap, write_agent

WAITING = 9
CAP = 8


class ParkingModel:
    """`restart svc-N` asks to restart svc-N (a gated call), then says what came of it; anything else is answered
    at once."""

    def __call__(self, body: dict[str, Any]) -> Step:
        msgs = body["messages"]
        last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
        question = str(msgs[last_user]["content"])
        results = [m for m in msgs[last_user:] if m["role"] == "tool"]
        asked = re.search(r"restart (svc-\d+)", question)
        if asked is None:
            return Step("reply", content="It is noon.")
        service = asked.group(1)
        if not results:
            return Step("calls", calls=[call("restart_service", {"service": service}, f"call_{service}")])
        return Step("reply", content=f"{service}: {unwrap(results[-1]['content'])}")


def thread_texts(fake: FakeSlack, ts: str) -> list[str]:
    return [str(c.params.get("text")) for c in fake.posts(thread_ts=ts)]


async def test_nine_parked_approvals_hold_no_slot_and_another_thread_is_answered_at_once(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, db_url: str, agents_dir: Path
):
    RESTARTS.clear()
    fake_llm.handler = ParkingModel()
    gated_agent(agents_dir, timeout="5m")
    bot = await start_bot(fake_slack, fake_llm, db_url, agents_dir, slack_max_concurrent_turns=CAP)
    fast(bot.app)
    try:
        stamps = [fake_slack.next_ts() for _ in range(WAITING)]
        for i, ts in enumerate(stamps):
            await bot.deliver(mention(f"restart svc-{i}", ts))
        await slack_request(fake_slack, WAITING)
        await eventually(lambda: bot.adapter.pipeline.busy == 0, what="every waiting turn parked (no task left)")
        parked = await rows(bot.app, "SELECT state, lease_owner FROM inbox ORDER BY id")
        assert [(r.state, r.lease_owner) for r in parked] == [("parked", None)] * WAITING

        other = fake_slack.next_ts()
        started = time.monotonic()
        await bot.deliver(mention("what time is it?", other))
        await answered(fake_slack, other)
        took = time.monotonic() - started
        assert thread_texts(fake_slack, other) == ["It is noon."]
        # answered while all nine still wait: it did not wait for a slot (the old way: until one expired, 5 min)
        assert [r.status for r in await approval_rows(bot.app)] == ["pending"] * WAITING, took
        assert not RESTARTS

        for row in await approval_rows(bot.app):
            channel, _, ts = row.message_ref.rpartition(":")
            await click(bot, BOSS, ACTION_APPROVE, str(row.id), ts, thread=row.thread, channel=channel)
        for i, ts in enumerate(stamps):
            await answered(fake_slack, ts)
            assert thread_texts(fake_slack, ts)[-1] == f"svc-{i}: svc-{i} restarted (run 1)"
        assert RESTARTS == {f"svc-{i}": 1 for i in range(WAITING)}
        assert len(await slack_requests(fake_slack)) == WAITING  # one request per call, none posted again
        assert [r.outcome for r in await approval_rows(bot.app)] == ["ran"] * WAITING
    finally:
        await bot.stop()


async def slack_requests(fake: FakeSlack) -> list[Any]:
    from tests.approvals.harness import blocks_of

    return [c for c in fake.calls_to("chat.postMessage") if any(b.get("type") == "actions" for b in blocks_of(c))]


@contextlib.asynccontextmanager
async def parked(fake_slack: FakeSlack, fake_llm: FakeOpenAI, db_url: str, agents_dir: Path,
                 question: str, **settings: Any) -> AsyncIterator[tuple[Any, str, str, str]]:
    """A bot whose turn in a new thread asked for an approval and parked: (bot, thread, request ts, id)."""
    RESTARTS.clear()
    fake_llm.handler = ParkingModel()
    gated_agent(agents_dir, timeout="5m")
    bot = await start_bot(fake_slack, fake_llm, db_url, agents_dir, **settings)
    fast(bot.app)
    try:
        asked = fake_slack.next_ts()
        await bot.deliver(mention(question, asked))
        _, ts, approval_id = await slack_request(fake_slack)
        await eventually(lambda: bot.adapter.pipeline.busy == 0, what="the turn parked")
        yield bot, asked, ts, approval_id
    finally:
        await bot.stop()


async def test_a_later_message_of_a_parked_thread_is_told_it_waits_and_the_thread_goes_on_after(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, db_url: str, agents_dir: Path
):
    async with parked(fake_slack, fake_llm, db_url, agents_dir, "restart svc-1") as (bot, asked, ts, approval_id):
        await bot.deliver(mention("what time is it?", fake_slack.next_ts(), thread_ts=asked))
        told = await eventually(lambda: [t for t in thread_texts(fake_slack, asked) if "waiting for an approval" in t],
                                what="the later message told that the thread waits")
        assert told == ["This thread is waiting for an approval to run `restart_service` (the request is above). "
                        "I will take new questions here once it is decided or expires; ask me again then."]
        assert len(fake_llm.requests) == 1  # it did not run ahead of the parked turn

        await click(bot, BOSS, ACTION_APPROVE, approval_id, ts, thread=asked)
        await eventually(lambda: "svc-1: svc-1 restarted (run 1)" in thread_texts(fake_slack, asked),
                         what="the parked turn's answer")
        await bot.deliver(mention("what time is it now?", fake_slack.next_ts(), thread_ts=asked))
        await eventually(lambda: "It is noon." in thread_texts(fake_slack, asked), what="the thread answered again")
        assert RESTARTS == {"svc-1": 1}


NIGHTLY = """
tools:
  restart_service:
    approval: {approvers: [U_BOSS], timeout: 5m}
schedules:
  - {name: nightly, every: 1h, prompt: "Restart nginx.", post_to: "slack:#ops-alerts"}
"""
GONE = "no longer running (I was restarted), so it was not run"


async def test_a_click_on_a_scheduled_run_that_is_gone_tells_the_channel_and_the_clicker(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, db_url: str, agents_dir: Path
):
    """A scheduled run has no inbox row: it waits in its process, which stops; the click on the next process
    finds nobody holding the turn."""
    RESTARTS.clear()
    write_agent(agents_dir, "tester", NIGHTLY)
    fake_llm.calls(call("restart_service", {"service": "nginx"}, "call_restart")).reply("Restarted nginx.")
    first = await start_bot(fake_slack, fake_llm, db_url, agents_dir)
    fast(first.app)
    store, _ = await synced_store(first.app)
    run = asyncio.create_task(schedule_runner(first.app, store).run(
        (await store.get("tester/nightly")), utcnow(), kind="scheduled"))  # type: ignore[arg-type]
    channel, ts, approval_id = await slack_request(fake_slack)

    async def waiting() -> bool:
        return all(r.message_ref for r in await approval_rows(first.app))

    await eventually(waiting, what="the request's message stored: the run waits")
    run.cancel()  # the run's process stops
    await asyncio.gather(run, return_exceptions=True)
    await first.stop()

    second = await start_bot(fake_slack, fake_llm, db_url, agents_dir)
    fast(second.app)
    try:
        await click(second, BOSS, ACTION_APPROVE, approval_id, ts, thread="", channel=channel)
        private = await eventually(lambda: fake_slack.calls_to("chat.postEphemeral"), what="the clicker told")
        assert [(c.params["user"], GONE in c.params["text"]) for c in private] == [(BOSS, True)]
        await eventually(lambda: any(GONE in str(c.params.get("text")) for c in fake_slack.posts(channel=channel)),
                         what="the channel told")
        assert RESTARTS["nginx"] == 0
        (row,) = await approval_rows(second.app)
        assert (row.status, row.outcome) == ("approved", "not_run")
    finally:
        await second.stop()


async def test_a_click_on_a_parked_turn_whose_inbox_row_was_settled_tells_the_thread_and_the_clicker(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, db_url: str, agents_dir: Path
):
    """A chat turn that is truly gone: its inbox row was settled without it (as recovery leaves a row it gave
    up on after MAX_ATTEMPTS cut resumptions). Before, SQLite recorded such a click silently."""
    async with parked(fake_slack, fake_llm, db_url, agents_dir, "restart svc-7") as (bot, asked, ts, approval_id):
        async with bot.app.engine.begin() as conn:
            await conn.execute(text("UPDATE inbox SET state = 'interrupted' WHERE state = 'parked'"))

        await click(bot, BOSS, ACTION_APPROVE, approval_id, ts, thread=asked)
        private = await eventually(lambda: fake_slack.calls_to("chat.postEphemeral"), what="the clicker told")
        assert [(c.params["user"], GONE in c.params["text"]) for c in private] == [(BOSS, True)]
        await eventually(lambda: any(GONE in t for t in thread_texts(fake_slack, asked)), what="the thread told")
        assert not RESTARTS and await tool_rows(bot.app) == []
        (row,) = await approval_rows(bot.app)
        assert (row.status, row.outcome) == ("approved", "not_run")
        assert OPS in row.message_ref


async def test_two_gated_calls_in_one_message_park_until_both_are_decided_and_each_runs_once(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    RESTARTS.clear()
    gated_agent(agents_dir, timeout="5m")
    fake_llm.calls(call("restart_service", {"service": "svc-a"}, "call_a"),
                   call("restart_service", {"service": "svc-b"}, "call_b")).reply("Both done.")
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, agents_dir)
    fast(bot.app)
    try:
        asked = fake_slack.next_ts()
        await bot.deliver(mention("restart both", asked))
        await slack_request(fake_slack, 2)
        await eventually(lambda: bot.adapter.pipeline.busy == 0, what="the turn parked on both")
        # the two requests are asked at once (a read-only tool), so their ids may come in either order
        by_call = {r.call_id: r for r in await approval_rows(bot.app)}
        first, second = by_call["call_a"], by_call["call_b"]
        for row in (first, second):
            channel, _, ts = row.message_ref.rpartition(":")
            await click(bot, BOSS, ACTION_APPROVE, str(row.id), ts, thread=asked, channel=channel)
            if row is first:  # resumed, ran svc-a, and parked again on svc-b: no new request
                await eventually(lambda: RESTARTS["svc-a"] == 1 and bot.adapter.pipeline.busy == 0,
                                 what="svc-a run and the turn parked again")
                assert RESTARTS["svc-b"] == 0 and len(fake_llm.requests) == 1
        await eventually(lambda: "Both done." in thread_texts(fake_slack, asked), what="the answer")
        assert RESTARTS == {"svc-a": 1, "svc-b": 1}
        assert len(await slack_requests(fake_slack)) == 2
        results = [m["content"] for m in tool_messages(fake_llm.requests[1])]
        assert results == ["svc-a restarted (run 1)", "svc-b restarted (run 1)"]  # in the model's order
        assert [r.outcome for r in await approval_rows(bot.app)] == ["ran", "ran"]
    finally:
        await bot.stop()


def in_progress(app: Any) -> float:
    found = re.search(rb"^yokebot_turns_in_progress ([0-9.e+-]+)$", app.metrics.render(), re.M)
    assert found is not None
    return float(found.group(1))


async def test_a_parked_turn_is_exported_while_it_waits_and_its_resumption_joins_the_same_trace(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, agents_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    """Before, the turn's span stayed open while a human decided (never exported if the process ended
    meanwhile), and the turns-in-progress gauge counted the waiting turn."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # spans go out at once, not every 5 s
    otlp = FakeOtlp().start()
    try:
        async with parked(fake_slack, fake_llm, sqlite_url, agents_dir, "restart svc-3",
                          otel_endpoint=otlp.endpoint) as (bot, asked, ts, approval_id):
            (waited,) = [s for s in otlp.wait_for(1, "invoke_agent tester") if s.name == "invoke_agent tester"]
            assert waited.attributes["yokebot.turn.status"] == "parked"
            assert waited.attributes["yokebot.turn.approvals"] == [approval_id]
            assert in_progress(bot.app) == 0  # nothing runs while a human decides
            await click(bot, BOSS, ACTION_APPROVE, approval_id, ts, thread=asked)
            await eventually(lambda: any("svc-3 restarted" in t for t in thread_texts(fake_slack, asked)),
                             what="the answer")
            roots = [s for s in otlp.wait_for(2, "invoke_agent tester") if s.name == "invoke_agent tester"]
            first, resumed = sorted(roots, key=lambda s: s.attributes.get("yokebot.turn.resumed", False))
            assert resumed.attributes["yokebot.turn.resumed"] is True
            assert resumed.attributes["yokebot.turn.status"] == "ok"
            assert first.trace_id == resumed.trace_id and first.span_id != resumed.span_id
            (tool,) = [s for s in otlp.wait_for(1, "execute_tool restart_service")
                       if s.name == "execute_tool restart_service" and s.parent_id == resumed.span_id]
            assert tool.attributes["yokebot.tool.reason"] == "approved by U_BOSS"
            await eventually(lambda: in_progress(bot.app) == 0, what="the gauge back to 0")
    finally:
        otlp.stop()


async def test_a_resumed_turn_sees_the_image_its_question_came_with(
    fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str, agents_dir: Path
):
    """The parked state keeps text only; before, the turn resumed after the click had lost the screenshot
    its question came with. Now the message's files are read again and its images put back."""
    from tests.approvals.harness import GATED_AGENT
    from tests.attachments.test_prepare import PNG
    from tests.attachments.test_slack_files import slack_file, with_files

    RESTARTS.clear()
    fake_llm.handler = ParkingModel()
    write_agent(agents_dir, "tester", "vision: true\n" + GATED_AGENT.format(timeout="5m"))
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, agents_dir)
    fast(bot.app)
    try:
        asked = fake_slack.next_ts()
        url = fake_slack.serve_file("T1/shot.png", PNG, "image/png")
        await bot.deliver(with_files(mention("restart svc-1, it shows this", asked),
                                     slack_file("shot.png", url, "image/png", size=len(PNG))))
        _, ts, approval_id = await slack_request(fake_slack)
        await eventually(lambda: bot.adapter.pipeline.busy == 0, what="the turn parked")
        await click(bot, BOSS, ACTION_APPROVE, approval_id, ts, thread=asked)
        await eventually(lambda: "svc-1: svc-1 restarted (run 1)" in thread_texts(fake_slack, asked),
                         what="the resumed turn's answer")
    finally:
        await bot.stop()

    def images(request: dict[str, Any]) -> int:
        content = next(m for m in request["messages"] if m["role"] == "user")["content"]
        return 0 if isinstance(content, str) else sum(part["type"] == "image_url" for part in content)

    first, resumed = fake_llm.requests
    assert (images(first), images(resumed)) == (1, 1)
