"""Whole turns through AgentService -> ReActLoop -> real openai SDK -> fake server, audited in SQL."""

from __future__ import annotations

import asyncio
import json

from bot.app import App
from bot.engine.service import TurnRequest
from tests.conftest import rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import tool_messages, unwrap


def req(text: str, thread: str = "t1", **kw: object) -> TurnRequest:
    return TurnRequest(platform="test", channel="c1", thread=thread, text=text, agent="tester", **kw)  # type: ignore[arg-type]


async def test_multi_step_turn_feeds_results_back_and_audits_everything(any_bot: App, fake_llm: FakeOpenAI):
    fake_llm.calls(call("echo", {"text": "first"}, "call_a"))
    fake_llm.calls(call("echo", {"text": "second", "times": 2}, "call_b"))
    fake_llm.reply("All done: first, second second.")

    result = await any_bot.service.handle(req("run the two echoes"))

    assert result.answer == "All done: first, second second."
    assert result.iterations == 3 and not result.hit_iteration_limit
    assert [(r.tool, r.status, r.content) for r in result.tool_calls] == [
        ("echo", "ok", "first"), ("echo", "ok", "second second")]
    # the model saw each result with the right tool_call_id, after the assistant message that asked for it
    second, third = fake_llm.requests[1], fake_llm.requests[2]
    assert second["messages"][-2]["tool_calls"][0]["id"] == "call_a"
    assert tool_messages(second)[-1] == {"role": "tool", "tool_call_id": "call_a", "content": "first"}
    assert second["messages"][-1]["content"].startswith("\u27e6untrusted tool echo\u27e7\n")  # data, marked
    assert [m["tool_call_id"] for m in tool_messages(third)] == ["call_a", "call_b"]

    llm = await rows(any_bot, "SELECT model, attempt, error, prompt_tokens, finish_reason FROM llm_calls "
                              "WHERE session_id = :s ORDER BY id", s=result.session_id)
    assert [(r.model, r.attempt, r.error, r.prompt_tokens) for r in llm] == [("test-model", 1, None, 10)] * 3
    assert [r.finish_reason for r in llm] == ["tool_calls", "tool_calls", "stop"]
    tools = await rows(any_bot, "SELECT tool, status, attempts, result FROM tool_invocations WHERE session_id = :s "
                                "ORDER BY id", s=result.session_id)
    assert [(t.tool, t.status, t.attempts, t.result) for t in tools] == [
        ("echo", "ok", 1, "first"), ("echo", "ok", 1, "second second")]
    msgs = await rows(any_bot, "SELECT role FROM messages WHERE session_id = :s ORDER BY id", s=result.session_id)
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    turn = (await rows(any_bot, "SELECT status, iterations, answer, stopped_by FROM turns WHERE id = :t",
                       t=result.turn_id))[0]
    assert (turn.status, turn.iterations, turn.answer, turn.stopped_by) == ("ok", 3, result.answer, "answer")


async def test_second_turn_continues_the_session_with_its_history(any_bot: App, fake_llm: FakeOpenAI):
    fake_llm.reply("Hello Ada.").reply("You are Ada.")
    first = await any_bot.service.handle(req("I am Ada"))
    second = await any_bot.service.handle(req("who am I?"))
    assert first.session_id == second.session_id
    sent = [(m["role"], m["content"]) for m in fake_llm.requests[1]["messages"][1:]]
    assert sent == [("user", "I am Ada"), ("assistant", "Hello Ada."), ("user", "who am I?")]


async def test_iteration_cap_ends_with_one_last_call_without_tools(bot: App, fake_llm: FakeOpenAI):
    for i in range(4):  # tester's profile caps at 4
        fake_llm.calls(call("echo", {"text": f"loop {i}"}))
    fake_llm.reply("I echoed loop 0 to loop 3; nothing else came up. Ask me to go on.")
    result = await bot.service.handle(req("never stop"))
    assert result.hit_iteration_limit and result.iterations == 4 and result.stopped_by == "iteration_limit"
    assert result.answer == "I echoed loop 0 to loop 3; nothing else came up. Ask me to go on."
    assert len(fake_llm.requests) == 5
    last = fake_llm.requests[-1]
    assert "tools" not in last and "step limit" in last["messages"][-1]["content"]
    turn = (await rows(bot, "SELECT status, hit_limit, stopped_by FROM turns WHERE id = :t", t=result.turn_id))[0]
    assert turn.status == "limit" and turn.hit_limit and turn.stopped_by == "iteration_limit"
    purposes = await rows(bot, "SELECT purpose FROM llm_calls WHERE turn_id = :t ORDER BY id", t=result.turn_id)
    assert [p.purpose for p in purposes] == ["turn"] * 4 + ["final"]
    assert json.loads(result.to_json())["stopped_by"] == "iteration_limit"


async def test_iteration_cap_falls_back_to_a_fixed_sentence_when_the_last_call_fails(bot: App, fake_llm: FakeOpenAI):
    for i in range(4):
        fake_llm.calls(call("echo", {"text": f"loop {i}"}))
    fake_llm.fail(400, message="no")
    result = await bot.service.handle(req("never stop"))
    assert result.stopped_by == "iteration_limit" and "stopped after 4 steps" in result.answer
    assert result.error is None


async def test_bad_tool_calls_become_observations_and_the_loop_goes_on(bot: App, fake_llm: FakeOpenAI):
    fake_llm.calls(
        call("no_such_tool", {}, "c1"),
        call("echo", "{not json", "c2"),
        call("echo", {"times": "many"}, "c3"),
        call("boom", {"reason": "disk on fire"}, "c4"),
        call("slow", {"seconds": 5}, "c5"),
    )
    fake_llm.reply("I saw the errors.")
    result = await bot.service.handle(req("break things"))
    assert result.answer == "I saw the errors."
    by_id = {m["tool_call_id"]: m["content"] for m in tool_messages(fake_llm.requests[1])}
    assert "no tool named 'no_such_tool'" in by_id["c1"] and "echo" in by_id["c1"]
    assert "not valid JSON" in by_id["c2"]
    assert "invalid arguments for echo" in by_id["c3"] and "text" in by_id["c3"] and "times" in by_id["c3"]
    assert "RuntimeError: disk on fire" in by_id["c4"]
    assert "timed out after 0.3 s" in by_id["c5"]
    statuses = await rows(bot, "SELECT tool, status FROM tool_invocations ORDER BY id")
    assert [(s.tool, s.status) for s in statuses] == [
        ("no_such_tool", "error"), ("echo", "error"), ("echo", "error"), ("boom", "error"), ("slow", "error")]


async def test_retryable_tool_succeeds_on_the_third_attempt(bot: App, fake_llm: FakeOpenAI):
    fake_llm.calls(call("flaky", {"key": "k-third"})).reply("ok")
    result = await bot.service.handle(req("flaky please"))
    assert result.tool_calls[0].status == "ok"
    assert result.tool_calls[0].content == "worked on attempt 3"
    row = (await rows(bot, "SELECT attempts, status FROM tool_invocations"))[0]
    assert (row.attempts, row.status) == (3, "ok")


async def test_model_429_is_retried_then_succeeds(bot: App, fake_llm: FakeOpenAI):
    fake_llm.fail(429, code="rate_limit_exceeded", headers={"retry-after-ms": "10"}).reply("fine now")
    result = await bot.service.handle(req("hello"))
    assert result.answer == "fine now" and result.error is None
    calls = await rows(bot, "SELECT attempt, error FROM llm_calls ORDER BY id")
    assert [c.attempt for c in calls] == [1, 2]
    assert "RateLimitError" in calls[0].error and calls[1].error is None


async def test_model_500_exhausted_gives_one_clear_sentence_and_error_rows(bot: App, fake_llm: FakeOpenAI):
    for _ in range(3):
        fake_llm.fail(500)
    result = await bot.service.handle(req("hello"))
    assert result.error is not None
    assert result.answer.startswith("Sorry, I could not finish this: the model endpoint answered HTTP 500")
    assert "gave up after 3 attempts" in result.answer and "\n" not in result.answer
    calls = await rows(bot, "SELECT attempt, error FROM llm_calls ORDER BY id")
    assert [c.attempt for c in calls] == [1, 2, 3] and all("500" in c.error for c in calls)
    turn = (await rows(bot, "SELECT status, error FROM turns"))[0]
    assert turn.status == "error" and "HTTP 500" in turn.error


async def test_bad_request_and_quota_are_not_retried(bot: App, fake_llm: FakeOpenAI):
    fake_llm.fail(400, code="invalid_value", message="temperature is out of range")
    result = await bot.service.handle(req("a very long story", thread="t-bad"))
    assert "the model rejected the request" in result.answer and result.stopped_by == "error"
    fake_llm.fail(429, code="insufficient_quota")
    result = await bot.service.handle(req("hello", thread="t-quota"))
    assert "out of quota" in result.answer
    assert len(fake_llm.requests) == 2  # one attempt each


async def test_model_timeout_is_retried(sqlite_url, fake_llm: FakeOpenAI, agents_dir):
    from bot.app import build_app
    from tests.conftest import make_settings
    from tests.helpers import registry

    app = await build_app(make_settings(sqlite_url, fake_llm, agents_dir, model_timeout_seconds=0.3),
                          registry=registry())
    try:
        fake_llm.hang(2).reply("after the timeout")
        result = await app.service.handle(req("hi"))
        assert result.answer == "after the timeout"
        errors = [r.error for r in await rows(app, "SELECT error FROM llm_calls ORDER BY id")]
        assert "Timeout" in errors[0] and errors[1] is None
    finally:
        await app.close()


async def test_concurrent_turns_on_one_session_do_not_interleave(bot: App, fake_llm: FakeOpenAI):
    fake_llm.latency = 0.05

    def handler(body):
        from tests.fakes.openai_server import Step
        last = body["messages"][-1]
        if last["role"] == "user":
            return Step("calls", calls=[call("echo", {"text": last["content"]})])
        return Step("reply", content=f"done {unwrap(last['content'])}")

    fake_llm.handler = handler
    results = await asyncio.gather(*(bot.service.handle(req(f"job {i}")) for i in range(3)))
    assert sorted(r.answer for r in results) == ["done job 0", "done job 1", "done job 2"]
    roles = await rows(bot, "SELECT role, turn_id FROM messages ORDER BY id")
    # each turn's four messages are contiguous: user, assistant(call), tool, assistant
    turns = [r.turn_id for r in roles]
    assert [r.role for r in roles] == ["user", "assistant", "tool", "assistant"] * 3
    assert all(len(set(turns[i:i + 4])) == 1 for i in range(0, 12, 4))
    assert len(bot.service.locks) == 0
    # the session was new for all three; the later turns still saw the earlier ones' history
    users_seen = [sum(m["role"] == "user" for m in r["messages"]) for r in fake_llm.requests]
    assert users_seen == [1, 1, 2, 2, 3, 3]


async def test_streaming_mode_assembles_tool_calls(sqlite_url, fake_llm: FakeOpenAI, agents_dir):
    from bot.app import build_app
    from tests.conftest import make_settings
    from tests.helpers import registry

    app = await build_app(make_settings(sqlite_url, fake_llm, agents_dir, model_stream=True), registry=registry())
    try:
        fake_llm.calls(call("echo", {"text": "streamed arguments arrive in pieces"}, "s1"))
        fake_llm.reply("A streamed answer, assembled.", usage=(7, 3))
        result = await app.service.handle(req("stream it"))
        assert fake_llm.requests[0]["stream"] is True
        assert result.tool_calls[0].content == "streamed arguments arrive in pieces"
        assert result.answer == "A streamed answer, assembled."
        assert result.usage.prompt_tokens == 17
    finally:
        await app.close()


async def test_unknown_session_id_is_a_clear_error(bot: App):
    import pytest

    from bot.engine.errors import SessionNotFound

    with pytest.raises(SessionNotFound, match="no session 'nope'"):
        await bot.service.handle(req("hi", session_id="nope"))


def test_json_trace_shape():
    from bot.engine.messages import ToolResult, TurnOutcome, TurnResult

    r = TurnResult("s", "t", TurnOutcome("a", 2, tool_calls=(ToolResult("c", "echo", {"text": "x"}, "x", "ok"),)))
    assert json.loads(r.to_json()) == {"answer": "a", "session_id": "s", "iterations": 2,
                                       "hit_iteration_limit": False, "stopped_by": "answer",
                                       "tool_calls": [{"tool": "echo", "arguments": {"text": "x"},
                                                       "result": "x", "status": "ok"}]}


async def test_default_iteration_cap_is_ten(tmp_path, sqlite_url, fake_llm: FakeOpenAI):
    from bot.app import build_app
    from tests.conftest import make_settings
    from tests.helpers import registry, write_agent

    agents = tmp_path / "agents-default"
    write_agent(agents, "tester", "tools: [echo]")
    app = await build_app(make_settings(sqlite_url, fake_llm, agents), registry=registry())
    try:
        for i in range(12):
            fake_llm.calls(call("echo", {"text": str(i)}))
        result = await app.service.handle(req("loop forever"))
        # 10 steps, then the last call without tools (answered by the 11th scripted step: a tool call it ignores)
        assert result.hit_iteration_limit and result.iterations == 10 and len(fake_llm.requests) == 11
        assert len(result.tool_calls) == 10
    finally:
        await app.close()


async def test_a_turn_cancelled_at_shutdown_is_recorded_as_stopped(sqlite_url, fake_llm: FakeOpenAI, agents_dir):
    from bot.app import build_app
    from tests.conftest import make_settings
    from tests.helpers import registry

    app = await build_app(make_settings(sqlite_url, fake_llm, agents_dir), registry=registry())
    fake_llm.hang(5)
    task = asyncio.create_task(app.service.handle(req("slow one", thread="t-cancel")))
    while not fake_llm.requests:
        await asyncio.sleep(0.01)
    task.cancel()
    results = await asyncio.gather(task, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    await asyncio.sleep(0)  # let the background finish be queued
    await app.close()
    from bot.store.db import create_engine
    engine = create_engine(sqlite_url)
    async with engine.connect() as conn:
        from sqlalchemy import text
        row = (await conn.execute(text("SELECT status, error, stopped_by FROM turns"))).one()
    await engine.dispose()
    assert row.status == "error" and row.error == "yokebot stopped during this turn"
    assert row.stopped_by == "interrupted"


async def test_a_streaming_model_tells_its_text_to_the_hooks_as_it_arrives(sqlite_url, fake_llm: FakeOpenAI, agents_dir):
    """text_delta: each fragment in order; a stream that breaks and is retried is told by model_attempt
    (with the error) before the fragments of the next attempt; the answer is the last attempt's whole text."""
    from bot.app import build_app
    from bot.engine.testing import RecordingHooks
    from tests.conftest import TEST_AGENT, make_settings
    from tests.helpers import registry, write_agent

    write_agent(agents_dir, "tester", TEST_AGENT + "guardrails: {output: []}\n")  # every fragment, as it comes
    app = await build_app(make_settings(sqlite_url, fake_llm, agents_dir, model_stream=True), registry=registry())
    try:
        fake_llm.reply("The first try breaks off here", cut_after=2)
        fake_llm.reply("The upstream is fine again.")
        hooks = RecordingHooks()
        result = await app.service.handle(req("stream it"), hooks)
    finally:
        await app.close()
    assert result.answer == "The upstream is fine again."
    kinds = [k for k in hooks.kinds if k in ("text_delta", "model_attempt")]
    assert kinds == ["text_delta"] * 2 + ["model_attempt"] + ["text_delta"] * 4 + ["model_attempt"]
    assert "".join(hooks.of("text_delta")[:2]) == "The first try br"
    assert hooks.attempts[0].error is not None and hooks.attempts[1].response is not None
    assert "".join(hooks.of("text_delta")[2:]) == "The upstream is fine again."


async def test_a_turn_stopped_mid_call_is_billed_in_llm_calls_and_leaves_no_dangling_question(
        sqlite_url, fake_llm: FakeOpenAI, agents_dir):
    """Ctrl-C during a model call: the cut call is in llm_calls (the provider may bill it; `usage` counts it),
    and the next turn's request does not carry two user messages in a row."""
    from bot.app import build_app
    from bot.engine.messages import USER_STOP
    from tests.conftest import make_settings
    from tests.helpers import registry

    app = await build_app(make_settings(sqlite_url, fake_llm, agents_dir), registry=registry())
    try:
        fake_llm.hang(5)
        task = asyncio.create_task(app.service.handle(req("first question", thread="t-stop")))
        while not fake_llm.requests:
            await asyncio.sleep(0.01)
        task.cancel(USER_STOP)
        await asyncio.gather(task, return_exceptions=True)
        await app.service.settled()
        fake_llm.reply("Second answer.")
        result = await app.service.handle(req("second question", thread="t-stop"))
        assert result.answer == "Second answer."
        calls = await rows(app, "SELECT turn_id, error FROM llm_calls ORDER BY id")
    finally:
        await app.close()
    assert len(calls) == 2 and calls[0].error is not None and "cut off" in calls[0].error
    roles = [m["role"] for m in fake_llm.requests[1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert fake_llm.requests[1]["messages"][2]["content"].startswith("(no answer")
