"""The engine's logic on the scripted in-process model: no HTTP, no SQL. What the hooks hear, in what
order; retries and their advice; the outcome of each way a turn can end; typed tool settings."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import Field

from bot.engine import replies
from bot.engine.context.prompt import PromptBuilder
from bot.engine.errors import ModelError, ToolRetry
from bot.engine.messages import TurnOutcome
from bot.engine.model.retrying import RetryingModel, RetryPolicy
from bot.engine.model.wire import ModelRequest
from bot.engine.run.context import ToolContext
from bot.engine.run.executor import ToolExecutor, ToolPolicy
from bot.engine.run.hooks import CompositeHooks, TurnHooks
from bot.engine.run.loop import ReActLoop
from bot.engine.run.tooling import tool
from bot.engine.service import AgentService, TurnRequest
from bot.engine.spec.profiles import AgentProfile
from bot.engine.spec.toolsettings import ToolSettings
from bot.engine.testing import MemorySessions, RecordingHooks, ScriptedModel, call
from tests.helpers import unwrap


class EchoSettings(ToolSettings):
    prefix: str = Field(default="")


@tool("echo", "Echo the text back.", settings=EchoSettings)
async def echo(ctx: ToolContext[EchoSettings], text: str) -> str:
    return f"{ctx.settings.prefix}{text} (for {ctx.agent} in {ctx.scope.channel})"


FLAKY: dict[str, int] = {}


@tool("flaky", "Fails twice, then works.")
async def flaky(ctx: ToolContext[ToolSettings], key: str) -> str:
    FLAKY[key] = FLAKY.get(key, 0) + 1
    if FLAKY[key] < 3:
        raise ToolRetry(f"transient {FLAKY[key]}")
    return f"worked on attempt {FLAKY[key]}"


PROFILE = AgentProfile(name="scripted", path=Path("agents/scripted/AGENT.md"), system_prompt="You test.",
                       max_iterations=3, tools={"echo": EchoSettings(prefix="> "), "flaky": ToolSettings()})


class Bot:
    def __init__(self, model: ScriptedModel, *hooks: TurnHooks) -> None:
        self.sleeps: list[float] = []
        self.sessions, self.recorded = MemorySessions(), RecordingHooks()

        async def sleep(seconds: float) -> None:
            self.sleeps.append(seconds)

        retrying = RetryingModel(model, RetryPolicy(max_attempts=3, base_seconds=1, max_wait_seconds=20), sleep)
        executor = ToolExecutor({"echo": echo, "flaky": flaky}, ToolPolicy(backoff_seconds=0))
        prompts = PromptBuilder(clock=lambda: datetime(2025, 1, 31, 12, tzinfo=UTC))
        loop = ReActLoop(retrying, executor, prompts, "default-model")
        self.service = AgentService(self.sessions, loop, lambda _: PROFILE,
                                    hooks=CompositeHooks(self.sessions, self.recorded, *hooks))

    async def ask(self, text: str, thread: str = "t1", hooks: TurnHooks | None = None):
        req = TurnRequest("test", "c1", thread, text, "scripted", trigger="mention", user="u1")
        return await self.service.handle(req, hooks=hooks)


async def test_a_multi_step_turn_tells_the_hooks_everything_in_order():
    model = ScriptedModel().calls(call("echo", {"text": "hi"}, "c1")).reply("Done.")
    bot = Bot(model)
    result = await bot.ask("say hi")

    assert (result.answer, result.iterations, result.stopped_by) == ("Done.", 2, "answer")
    assert bot.recorded.kinds == ["turn_started", "message", "model_attempt", "message", "tool_started",
                                  "tool_finished", "message", "model_attempt", "message", "turn_finished"]
    (tool_result,) = bot.recorded.tool_results
    assert tool_result.content == "> hi (for scripted in c1)"  # the tool read its own typed settings
    assert [m.role for m in bot.recorded.messages] == ["user", "assistant", "tool", "assistant"]
    assert [a.attempt for a in bot.recorded.attempts] == [1, 1]
    assert bot.recorded.outcomes == [result.outcome]
    assert result.usage.prompt_tokens == 20
    # the second request carried the tool's answer back to the model
    assert unwrap(model.requests[1].messages[-1].content) == "> hi (for scripted in c1)"


async def test_the_next_turn_sees_the_history_the_hooks_kept():
    model = ScriptedModel().reply("Hello Ada.").reply("You are Ada.")
    bot = Bot(model)
    await bot.ask("I am Ada")
    await bot.ask("who am I?")
    sent = [(m.role, m.content) for m in model.requests[1].messages[1:]]
    assert sent == [("user", "I am Ada"), ("assistant", "Hello Ada."), ("user", "who am I?")]


async def test_retryable_errors_are_retried_honouring_retry_after_and_each_attempt_is_reported():
    model = ScriptedModel(ModelError("rate limited", retryable=True, status=429, retry_after=7.0),
                          ModelError("overloaded", retryable=True, status=503), "fine now")
    bot = Bot(model)
    result = await bot.ask("hello")
    assert result.answer == "fine now" and result.error is None
    assert [(a.attempt, a.error is None) for a in bot.recorded.attempts] == [(1, False), (2, False), (3, True)]
    assert bot.sleeps[0] == 7.0  # the server's Retry-After, not the backoff
    assert 0 <= bot.sleeps[1] <= 2.0  # exponential backoff with jitter: base 1 s, second wait


async def test_a_bad_request_is_not_retried_and_the_user_reads_one_sentence():
    bot = Bot(ScriptedModel(ModelError("the model rejected the request", status=400, code="bad_request")))
    result = await bot.ask("hello")
    assert len(bot.recorded.attempts) == 1 and bot.sleeps == []
    assert result.stopped_by == "error" and result.error == "the model rejected the request"
    assert result.answer == replies.model_failed("the model rejected the request")
    assert bot.recorded.messages[-1].content == result.answer  # the apology is in the history too


async def test_giving_up_after_the_last_attempt_says_so():
    model = ScriptedModel(*[ModelError("the model endpoint answered HTTP 500", retryable=True, status=500)] * 3)
    result = await Bot(model).ask("hello")
    assert result.error == "the model endpoint answered HTTP 500 (gave up after 3 attempts)"
    assert result.outcome.status == "error"


async def test_a_model_that_raises_something_unexpected_ends_the_turn_cleanly():
    result = await Bot(ScriptedModel(RuntimeError("socket on fire"))).ask("hello")
    assert result.stopped_by == "error" and "RuntimeError" in (result.error or "")


async def test_the_iteration_limit_gives_a_partial_answer():
    model = ScriptedModel(*[[call("echo", {"text": str(i)}, f"c{i}")] for i in range(3)])
    result = await Bot(model).ask("never stop")
    assert result.stopped_by == "iteration_limit" and result.hit_iteration_limit
    assert result.outcome.status == "limit" and result.iterations == 3
    assert result.answer.startswith("I stopped after 3 steps") and "echo (ok)" in result.answer


async def test_tool_retries_go_through_tenacity_and_count_attempts():
    FLAKY.clear()
    model = ScriptedModel().calls(call("flaky", {"key": "k"})).reply("ok")
    bot = Bot(model)
    await bot.ask("flaky")
    (result,) = bot.recorded.tool_results
    assert (result.status, result.attempts, result.content) == ("ok", 3, "worked on attempt 3")


async def test_a_calls_own_hooks_hear_only_its_turn_after_the_standing_ones():
    bot = Bot(ScriptedModel("one", "two"))
    mine = RecordingHooks()
    await bot.ask("first", hooks=mine)
    await bot.ask("second")
    assert [o.answer for o in mine.outcomes] == ["one"]
    assert [o.answer for o in bot.recorded.outcomes] == ["one", "two"]


class FailsAtFinish(TurnHooks):
    async def turn_finished(self, run, outcome):
        raise RuntimeError("the database refused the turn")


async def test_a_hook_that_fails_fails_the_turn_but_every_other_hook_still_hears_the_end():
    bot = Bot(ScriptedModel("answer"), FailsAtFinish())
    late = RecordingHooks()
    with pytest.raises(RuntimeError, match="refused"):
        await bot.ask("hello", hooks=late)
    assert [o.answer for o in late.outcomes] == ["answer"]


async def test_a_cancelled_turn_is_reported_as_interrupted():
    started = asyncio.Event()

    def hang(_: ModelRequest) -> str:
        started.set()
        raise asyncio.CancelledError  # as if the task was cancelled while waiting for the model

    bot = Bot(ScriptedModel(hang))
    with pytest.raises(asyncio.CancelledError):
        await bot.ask("slow")
    for _ in range(5):
        await asyncio.sleep(0)  # the end is recorded in the background
    (outcome,) = bot.recorded.outcomes
    assert outcome == TurnOutcome("", error=replies.TURN_STOPPED, stopped_by="interrupted")


def test_every_stop_reason_maps_to_a_turn_status():
    def status(by: str, err: str | None) -> str:
        return TurnOutcome("", stopped_by=by, error=err).status
    assert status("answer", None) == "ok"
    assert status("iteration_limit", None) == "limit" and status("budget:tokens", None) == "limit"
    assert status("error", "x") == "error" and status("interrupted", "x") == "error"
