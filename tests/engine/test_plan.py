"""`mode: plan`: a numbered plan first, each step through the ReAct loop with its own budget, one replan
after a failed step, an answer that reports each step; the plan is stored with the turn and traced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.app import build_app
from bot.engine.run.plan import parse_plan
from bot.engine.service import TurnRequest
from bot.observability.queries import trace
from tests.conftest import make_settings, rows
from tests.engine.test_context import dump, is_compaction
from tests.fakes.openai_server import FakeOpenAI, Step, call
from tests.helpers import registry, write_agent

PLANNER = """
description: plans first
mode: plan
max_iterations: {max_iterations}
plan: {{max_steps: 3, step_max_iterations: 2, max_replans: 1}}
tools: [echo]
"""


async def planner_app(tmp_path: Path, fake: FakeOpenAI, max_iterations: int = 12):
    agents = tmp_path / "agents"
    write_agent(agents, "planner", PLANNER.format(max_iterations=max_iterations))
    settings = make_settings(f"sqlite+aiosqlite:///{tmp_path / 'plan.db'}", fake, agents, default_agent="planner")
    return await build_app(settings, registry=registry())


def ask(text: str) -> TurnRequest:
    return TurnRequest(platform="cli", channel="c", thread="t", text=text, agent="planner", trigger="cli")


def test_parse_plan_reads_numbered_lines_only():
    text = "Here is my plan:\n1. Check the error log\n2) Count 502s\n- not a step\n3. Alert if needed\n4. Extra"
    assert parse_plan(text, 3) == ["Check the error log", "Count 502s", "Alert if needed"]


async def test_plan_steps_run_through_the_loop_and_the_answer_reports_each(tmp_path: Path, fake_llm: FakeOpenAI):
    app = await planner_app(tmp_path, fake_llm)
    try:
        fake_llm.reply("1. Echo alpha\n2. Echo beta")
        fake_llm.calls(call("echo", {"text": "alpha"}))
        fake_llm.reply("alpha is fine")
        fake_llm.calls(call("echo", {"text": "beta"}))
        fake_llm.reply("beta is fine")
        result = await app.service.handle(ask("check alpha and beta"))
        assert result.answer.splitlines() == ["Plan and findings:", "1. Echo alpha: alpha is fine",
                                              "2. Echo beta: beta is fine"]
        assert result.iterations == 5 and [c.tool for c in result.tool_calls] == ["echo", "echo"]
        # the first call has no tools and asks for the plan; a step's request names its step
        assert "tools" not in fake_llm.requests[0] and "numbered list" in fake_llm.requests[0]["messages"][-1]["content"]
        assert "Now do step 2 only: Echo beta" in fake_llm.requests[3]["messages"][-1]["content"]
        assert "1. Echo alpha: alpha is fine" in fake_llm.requests[3]["messages"][-1]["content"]
        await app.store.flush()
        (plan,) = await rows(app, "SELECT plan FROM turns WHERE id = :t", t=result.turn_id)
        stored = plan[0] if isinstance(plan[0], dict) else json.loads(plan[0])
        assert [(s["text"], s["status"], s["iterations"]) for s in stored["steps"]] == [
            ("Echo alpha", "done", 2), ("Echo beta", "done", 2)]
        traced = await trace(app.engine, result.session_id)
        assert traced.turns[0].plan is not None and traced.turns[0].plan["steps"][1]["finding"] == "beta is fine"
        # the thread shows the plan: it is an assistant message of the session
        thread = await app.store.load_thread(result.session_id, 5)
        history = [m for t in thread.turns for m in t.messages]
        assert any(m.role == "assistant" and m.content.startswith("Plan:\n1. Echo alpha") for m in history)
    finally:
        await app.close()


async def test_a_step_out_of_budget_replans_once(tmp_path: Path, fake_llm: FakeOpenAI):
    app = await planner_app(tmp_path, fake_llm)
    try:
        fake_llm.reply("1. Echo forever\n2. Never reached")
        fake_llm.calls(call("echo", {"text": "a"}))
        fake_llm.calls(call("echo", {"text": "b"}))  # the step's 2 model calls are used up: it failed
        fake_llm.reply("still echoing")  # the loop's last call without tools: what the step found
        fake_llm.reply("1. Echo once")  # the replan
        fake_llm.calls(call("echo", {"text": "c"}))
        fake_llm.reply("done once")
        result = await app.service.handle(ask("try it"))
        lines = result.answer.splitlines()
        assert lines[1].startswith("1. Echo forever (did not finish)")
        assert lines[2] == "2. Echo once: done once"
        assert "replanned after step 1" in lines[3]
        await app.store.flush()
        traced = await trace(app.engine, result.session_id)
        plan = traced.turns[0].plan
        assert plan is not None and plan["replans"][0]["steps"] == ["Echo once"]
    finally:
        await app.close()


async def test_the_turn_cap_applies_across_steps(tmp_path: Path, fake_llm: FakeOpenAI):
    app = await planner_app(tmp_path, fake_llm, max_iterations=3)
    try:
        fake_llm.reply("1. First\n2. Second\n3. Third")
        fake_llm.reply("first done")
        fake_llm.reply("second done")
        result = await app.service.handle(ask("three things"))
        assert result.iterations == 3 and result.hit_iteration_limit
        assert "3. Third (not run)" in result.answer and "limit of 3 model calls" in result.answer
        assert len(fake_llm.requests) == 3
        await app.store.flush()
        # the plan call is audited like the steps' calls (it reaches the hooks), and the turn says why it stopped
        assert await rows(app, "SELECT stopped_by, status FROM turns") == [("iteration_limit", "limit")]
        assert await rows(app, "SELECT count(*) FROM llm_calls") == [(3,)]
    finally:
        await app.close()


async def test_a_failed_plan_call_ends_the_turn_as_an_error(tmp_path: Path, fake_llm: FakeOpenAI):
    app = await planner_app(tmp_path, fake_llm)
    try:
        fake_llm.fail(400, "invalid_request_error")
        result = await app.service.handle(ask("anything"))
        assert result.answer.startswith("Sorry, I could not finish this") and result.stopped_by == "error"
        await app.store.flush()
        (row,) = await rows(app, "SELECT stopped_by, status, plan FROM turns")
        assert row[:2] == ("error", "error") and row[2] is None
        assert await rows(app, "SELECT count(*) FROM llm_calls WHERE error IS NOT NULL") == [(1,)]
    finally:
        await app.close()


@pytest.mark.parametrize("plan_text", ["I will just look around.", ""])
async def test_no_numbered_plan_runs_the_request_as_one_step(tmp_path: Path, fake_llm: FakeOpenAI, plan_text: str):
    app = await planner_app(tmp_path, fake_llm)
    try:
        fake_llm.reply(plan_text or " ")
        fake_llm.reply("looked")
        result = await app.service.handle(ask("look around"))
        assert result.answer.splitlines()[1] == "1. look around: looked"
    finally:
        await app.close()


async def test_trace_shows_the_plan_steps_and_replans(tmp_path: Path, fake_llm: FakeOpenAI):
    from rich.console import Console

    from bot.observability.render import trace_json, turn_tree

    app = await planner_app(tmp_path, fake_llm)
    try:
        fake_llm.reply("1. Echo forever")
        fake_llm.calls(call("echo", {"text": "a"}))
        fake_llm.calls(call("echo", {"text": "b"}))
        fake_llm.reply("still echoing")  # the loop's last call without tools
        fake_llm.reply("1. Give up politely")
        fake_llm.reply("gave up")
        result = await app.service.handle(ask("try"))
        await app.store.flush()
        traced = await trace(app.engine, result.session_id)
        console = Console(record=True, width=200)
        console.print(turn_tree(traced.turns[0]))
        shown = console.export_text()
        assert "1. Echo forever [failed, 2 call(s)]" in shown
        assert "2. Give up politely [done, 1 call(s)]: gave up" in shown
        assert "replanned after step 1" in shown
        assert json.loads(trace_json(traced))["turns"][0]["plan"]["steps"][1]["status"] == "done"
    finally:
        await app.close()


async def test_a_plan_turn_sees_the_threads_summary_not_the_turns_it_folded(tmp_path: Path, fake_llm: FakeOpenAI):
    app = await planner_app(tmp_path, fake_llm)
    try:
        fake_llm.reply("1. Echo alpha")
        fake_llm.reply("alpha is fine")
        first = await app.service.handle(ask("check alpha"))
        await app.store.flush()
        # the thread's older turns are folded into a summary (as compaction does when a thread grows long)
        await app.store.save_summary(first.session_id, "compaction", first.turn_id,
                                     "Earlier: alpha was checked and fine (SUMMARY-7731).", 1)
        await app.store.flush()
        fake_llm.reply("1. Echo beta")
        fake_llm.reply("beta is fine")
        await app.service.handle(ask("now beta"))
        planning, step = fake_llm.requests[2], fake_llm.requests[3]
        for request in (planning, step):
            system = request["messages"][0]
            assert system["role"] == "system" and "SUMMARY-7731" in system["content"]
            assert not any(m["content"] == "check alpha" for m in request["messages"])  # folded, not resent
    finally:
        await app.close()


# --- a long thread in plan mode: fitted, compacted, recovered like a ReAct turn ------------------------------
LONG_PLANNER = """
description: plans first, on a long thread
mode: plan
tools: [dump]
context_window: {window}
plan: {{max_steps: 2, step_max_iterations: 3, max_replans: 0}}
"""


def plan_thread_model(body: dict[str, Any]) -> Step:
    """Each question gets a one-step plan, the step one 10,000-character dump, then its finding."""
    last = body["messages"][-1]
    if is_compaction(body):
        return Step("reply", content="Summary: numbered questions; each dump showed 502s from 10.0.0.7.")
    if last["role"] == "tool":
        part = json.loads(next(m for m in reversed(body["messages"]) if m.get("tool_calls"))
                          ["tool_calls"][0]["function"]["arguments"])["part"]
        return Step("reply", content=f"part {part} shows 502s")
    if "Now do step" in last["content"]:
        step = last["content"].split("Now do step 1 only: Dump part ")[1]
        return Step("calls", calls=[call("dump", {"part": int(step.split()[0])})])
    question = body["messages"][-2]["content"]  # the planning call: [..., question, PLAN_PROMPT]
    return Step("reply", content=f"1. Dump part {question.split()[-1]}")


@pytest.mark.parametrize("claimed_window", [6000, 24000])
async def test_a_plan_turn_on_a_thread_larger_than_the_window_is_compacted_and_answered(
    tmp_path: Path, fake_llm: FakeOpenAI, claimed_window: int
):
    # 6000: the profile says the server's window; 24000: it claims four times more, so the server refuses
    # the first prompt over its real window and the turn recovers (compacts and asks again)
    agents = tmp_path / "agents"
    write_agent(agents, "planner", LONG_PLANNER.format(window=claimed_window))
    settings = make_settings(f"sqlite+aiosqlite:///{tmp_path / 'plan.db'}", fake_llm, agents, default_agent="planner")
    app = await build_app(settings, registry={**registry(), "dump": dump})
    try:
        fake_llm.handler = plan_thread_model
        for n in range(1, 4):  # three turns of ~2,600 server tokens each: the thread outgrows a 6,000 window
            assert (await app.service.handle(ask(f"question {n}"))).error is None
        fake_llm.enforce_window(6000, "openai")
        for n in range(4, 7):
            result = await app.service.handle(ask(f"question {n}"))
            assert result.error is None and result.stopped_by == "answer", result.answer
            assert result.answer.splitlines() == ["Plan and findings:", f"1. Dump part {n}: part {n} shows 502s"]
        # an honest window: every prompt fits before it is sent; a claimed one: refused, then fitted
        assert (fake_llm.refused == 0 and max(fake_llm.prompt_tokens) <= 6000) == (claimed_window == 6000)
        await app.store.flush()
        summaries = await rows(app, "SELECT kind FROM summaries")
        assert summaries and all(s.kind == "summary" for s in summaries)
        plan_calls = [b for b in fake_llm.requests if "numbered list" in b["messages"][-1]["content"]]
        assert "## Earlier in this conversation (summary)" in plan_calls[-1]["messages"][0]["content"]
    finally:
        await app.close()
