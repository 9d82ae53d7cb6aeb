"""Long threads and runaway turns, through AgentService -> ReActLoop -> real openai SDK -> a fake server that
enforces a token window the way real servers do (HTTP 400 with their own error bodies), audited in SQL."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build_app
from bot.engine.context.tokens import Calibration, TokenCounter, default_window
from bot.engine.context.window import fit
from bot.engine.messages import HistoryTurn, Message, ToolCall
from bot.engine.model.overflow import detect
from bot.engine.run.context import ToolContext
from bot.engine.run.tooling import tool
from bot.engine.service import TurnRequest
from bot.engine.spec.limits import ContextSpec
from tests.conftest import make_settings, rows
from tests.fakes.openai_server import FakeOpenAI, Step, call, overflow_body
from tests.helpers import registry, write_agent

BIG = 10_000


@tool("dump", "Return a large block of log output. Use it in tests.")
async def dump(ctx: ToolContext, part: int = 0) -> str:
    line = f"2026-11-30T10:00:00Z part={part} upstream=10.0.0.7 status=502 request_id=abcdef0123456789\n"
    return (line * (BIG // len(line) + 1))[:BIG]


def req(text: str, thread: str = "t1", agent: str = "long") -> TurnRequest:
    return TurnRequest(platform="console", channel="local", thread=thread, text=text, agent=agent,
                       trigger="console", user="tester")


async def make_app(sqlite_url: str, llm: FakeOpenAI, tmp_path: Path, front: str, **settings: Any) -> App:
    agents = tmp_path / "agents-ctx"
    write_agent(agents, "long", front)
    return await build_app(make_settings(sqlite_url, llm, agents, default_agent="long", **settings),
                           registry={**registry(), "dump": dump})


def is_compaction(body: dict[str, Any]) -> bool:
    return "tools" not in body and body["messages"][0]["content"].startswith("You keep the memory")


def thread_model(body: dict[str, Any]) -> Step:
    """A model for a long thread: each question -> one dump call -> an answer naming the question."""
    if is_compaction(body):
        return Step("reply", content="Summary: the user asked numbered questions; every dump showed 502s "
                                     "from upstream 10.0.0.7.")
    last = body["messages"][-1]
    if last["role"] == "user":
        n = int(last["content"].split()[-1])
        return Step("calls", calls=[call("dump", {"part": n})])
    question = next(m for m in reversed(body["messages"]) if m["role"] == "user")["content"]
    return Step("reply", content=f"Answer to {question}")


# --- counting and fitting ----------------------------------------------------------------------------------
def test_default_windows_by_model_family():
    assert default_window("gpt-4o-mini") == 128_000
    assert default_window("openai/gpt-4o-2024-08-06") == 128_000
    assert default_window("gpt-4") == 8_192
    assert default_window("llama3.1:8b") == 131_072
    assert default_window("llama3:8b") == 8_192
    assert default_window("qwen2.5:7b-instruct") == 32_768
    assert default_window("some-local-model") == 8_192


def test_counting_a_twenty_message_prompt_costs_well_under_a_millisecond():
    counter = TokenCounter("llama3.1:8b")
    msgs = [Message.user(f"question {i} " + "x" * 2000) for i in range(20)]
    counter.messages(msgs)  # first sight of the messages
    start = time.perf_counter()
    for _ in range(200):
        counter.messages(msgs)
    assert (time.perf_counter() - start) / 200 < 0.001


def test_calibration_learns_the_servers_count():
    cal = Calibration()
    cal.observe("m", counted=1000, reported=750)
    cal.observe("m", counted=2000, reported=1500)
    assert cal.scale("m", 4000) == 3000
    assert cal.scale("other", 4000) == 4000
    cal.observe("liar", counted=3000, reported=10)  # a server that reports nonsense cannot make room appear
    assert cal.ratio("liar") == 0.5


def test_exact_tokenizer_for_openai_names_when_installed():
    pytest.importorskip("bpe_openai")
    counter = TokenCounter("gpt-4o")
    assert counter.exact and counter.text("hello world") == 2
    assert not TokenCounter("llama3.1:8b").exact


def _turn(i: int, result: str) -> HistoryTurn:
    c = ToolCall(f"c{i}", "dump", "{}")
    return HistoryTurn(f"t{i}", (Message.user(f"q{i}"), Message.assistant("", (c,)),
                                 Message.tool(c.id, "dump", result), Message.assistant(f"a{i}")))


def test_fit_shortens_earlier_tool_results_first_and_keeps_the_current_turn_whole():
    from bot.engine.context.window import TokenWindow

    counter, spec = TokenCounter("m"), ContextSpec(tool_result_chars=1000)
    earlier = [_turn(i, f"head{i} " + "y" * 9000 + f" tail{i}") for i in range(3)]
    c = ToolCall("cur", "dump", "{}")
    current = [Message.user("q now"), Message.assistant("", (c,)), Message.tool("cur", "dump", "z" * 9000)]
    fitted = fit(Message.system("sys"), earlier, current, 0, TokenWindow(8000, 1000), counter, spec)
    tools = [m for m in fitted.messages if m.role == "tool"]
    assert len(tools) == 4 and fitted.dropped_turns == 0 and fitted.counted <= 7000
    assert all(t.content.startswith(f"head{i}") and t.content.endswith(f"tail{i}") for i, t in enumerate(tools[:3]))
    assert all("characters cut from the middle of this tool result" in t.content for t in tools[:3])
    assert tools[-1].content == "z" * 9000  # the current turn's result is whole
    # still too big: the oldest turns go, whole (a tool call never without its result)
    fitted = fit(Message.system("sys"), earlier, current, 0, TokenWindow(4500, 500), counter, spec)
    assert fitted.dropped_turns >= 1 and fitted.messages[1].role == "user"
    assert [m.role for m in fitted.messages[-3:]] == ["user", "assistant", "tool"]


@pytest.mark.parametrize("flavour", ["openai", "vllm", "llamacpp", "ollama", "litellm"])
def test_each_servers_context_length_error_is_recognised(flavour: str):
    body = overflow_body(flavour, 4096, 5000)
    found = detect(400, f"Error code: 400 - {body}", body)
    assert found is not None
    if flavour != "ollama":  # Ollama states no numbers
        assert found.window == 4096 and found.prompt_tokens in (5000, 5256)


def test_other_bad_requests_are_not_overflows():
    body = {"error": {"message": "temperature must be at most 2", "type": "invalid_request_error",
                      "code": "invalid_value"}}
    assert detect(400, str(body), body) is None
    assert detect(429, "maximum context length", None) is None


# --- a long thread -----------------------------------------------------------------------------------------
@pytest.fixture
async def long_app(sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path) -> AsyncIterator[App]:
    app = await make_app(sqlite_url, fake_llm, tmp_path, "tools: [dump]\nmax_iterations: 4\ncontext_window: 6000")
    yield app
    await app.close()


async def test_a_200_turn_thread_with_10000_character_tool_results_never_dies_of_length(
    long_app: App, fake_llm: FakeOpenAI
):
    fake_llm.enforce_window(6000, "openai")
    fake_llm.handler = thread_model
    firsts: list[int] = []  # the server's count of each turn's first prompt
    for n in range(1, 201):
        before = len(fake_llm.prompt_tokens)
        result = await long_app.service.handle(req(f"question {n}"))
        assert result.error is None and result.answer == f"Answer to question {n}", (n, result.answer)
        turn_counts = [c for b, c in zip(fake_llm.requests[before:], fake_llm.prompt_tokens[before:], strict=True)
                       if not is_compaction(b)]
        firsts.append(turn_counts[0])
    assert fake_llm.refused == 0 and max(fake_llm.prompt_tokens) <= 6000
    assert firsts[-1] <= 6000
    # flat after compaction: the last 100 turns cost no more than turns 20-100 did (a sawtooth between
    # compactions, not a slope), and well inside the window
    assert max(firsts[100:]) <= max(firsts[20:100]) * 1.05 and max(firsts[100:]) < 0.6 * 6000
    compactions = await rows(long_app, "SELECT request, error FROM llm_calls WHERE purpose = 'compaction'")
    summaries = await rows(long_app, "SELECT kind, content, folded_turns FROM summaries ORDER BY id")
    assert len(compactions) == len(summaries) >= 10 and all(c.error is None for c in compactions)
    assert all(s.kind == "summary" and s.content.startswith("Summary:") for s in summaries)
    later = json.loads(compactions[-1].request) if isinstance(compactions[-1].request, str) else compactions[-1].request
    assert "Summary so far:\nSummary: the user asked" in later["messages"][1]["content"]  # builds on the last
    # the summary rides in the system message of later prompts
    last_turn = [b for b in fake_llm.requests if not is_compaction(b)][-1]
    assert "## Earlier in this conversation (summary)" in last_turn["messages"][0]["content"]


@pytest.mark.parametrize("flavour", ["openai", "vllm", "llamacpp", "ollama", "litellm"])
async def test_a_context_length_error_compacts_and_retries(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, flavour: str
):
    # the profile claims a window four times larger than the server's: the server refuses, we recover
    app = await make_app(sqlite_url, fake_llm, tmp_path, "tools: [dump]\nmax_iterations: 4\ncontext_window: 16000")
    try:
        fake_llm.handler = thread_model
        for n in range(1, 4):
            assert (await app.service.handle(req(f"question {n}"))).error is None
        fake_llm.enforce_window(4000, flavour)
        result = await app.service.handle(req("question 4"))
        assert result.error is None and result.answer == "Answer to question 4"
        assert fake_llm.refused >= 1
        calls = await rows(app, "SELECT purpose, error FROM llm_calls WHERE turn_id = :t ORDER BY id",
                           t=result.turn_id)
        assert calls[0].error is not None and "400" in calls[0].error
        assert any(c.purpose == "compaction" and c.error is None for c in calls)
        assert calls[-1].error is None and calls[-1].purpose == "turn"
        assert (await app.service.handle(req("question 5"))).answer == "Answer to question 5"
    finally:
        await app.close()


# --- reset ------------------------------------------------------------------------------------------------
async def test_reset_in_the_chat_forgets_the_thread_without_a_model_call(bot: App, fake_llm: FakeOpenAI):
    fake_llm.reply("Hello Ada.")
    await bot.service.handle(TurnRequest("console", "local", "t1", "I am Ada", "tester"))
    result = await bot.service.handle(TurnRequest("console", "local", "t1", "/reset", "tester"))
    assert result.iterations == 0 and "forgotten" in result.answer and len(fake_llm.requests) == 1
    fake_llm.reply("I do not know who you are.")
    await bot.service.handle(TurnRequest("console", "local", "t1", "who am I?", "tester"))
    sent = [(m["role"], m["content"]) for m in fake_llm.requests[-1]["messages"][1:]]
    assert sent == [("user", "who am I?")]


# --- loop guard -------------------------------------------------------------------------------------------
async def test_the_loop_guard_warns_then_ends_the_turn_before_the_cap(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path
):
    app = await make_app(sqlite_url, fake_llm, tmp_path, "tools: [echo]\nmax_iterations: 10")
    try:
        for _ in range(4):
            fake_llm.calls(call("echo", {"text": "same"}))
        fake_llm.reply("I kept getting 'same' back from echo; nothing new. Try another question.")
        result = await app.service.handle(req("loop"))
        assert result.stopped_by == "loop" and result.iterations == 4 < 10
        assert result.answer.startswith("I kept getting 'same'")
        third = fake_llm.requests[3]["messages"][-1]
        assert third["role"] == "tool" and "called echo with the same arguments 3 times" in third["content"]
        assert len(result.tool_calls) == 3  # the fourth repeat was not run
        turn = await rows(app, "SELECT stopped_by FROM turns WHERE id = :t", t=result.turn_id)
        assert turn[0].stopped_by == "loop"
        last = fake_llm.requests[-1]
        assert "tools" not in last and "loop guard" in last["messages"][-1]["content"]
    finally:
        await app.close()


async def test_the_loop_guard_catches_a_ping_pong(sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path):
    app = await make_app(sqlite_url, fake_llm, tmp_path, "tools: [echo]\nmax_iterations: 10")
    try:
        for i in range(5):
            fake_llm.calls(call("echo", {"text": "ping" if i % 2 == 0 else "pong"}))
        fake_llm.reply("echo only bounces ping and pong; there is nothing else to find.")
        result = await app.service.handle(req("bounce"))
        assert result.stopped_by == "loop" and result.iterations == 5
        assert "alternating between the same two tool calls" in fake_llm.requests[4]["messages"][-1]["content"]
    finally:
        await app.close()


# --- budgets ----------------------------------------------------------------------------------------------
BUDGETS = {
    "tool_calls": ("budget:\n  tool_calls: 2", {}),
    "tokens": ("budget:\n  tokens: 40", {}),
    "cost": ("budget:\n  cost: 0.02", {"model_prices": {"test-model": {"input": 1000.0, "output": 1000.0}}}),
    "seconds": ("budget:\n  seconds: 0.25", {}),
}


@pytest.mark.parametrize("which", list(BUDGETS))
async def test_each_budget_ends_the_turn_with_a_useful_partial_answer(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, which: str
):
    front, settings = BUDGETS[which]
    tools = "[slow, echo]" if which == "seconds" else "[echo]"
    app = await make_app(sqlite_url, fake_llm, tmp_path, f"tools: {tools}\nmax_iterations: 10\n{front}", **settings)
    try:
        def model(body: dict[str, Any]) -> Step:  # usage 10+5 per call: 45 tokens after 3, $0.015 per call
            if "tools" not in body:
                return Step("reply", content=f"Partial: I echoed a few steps before the {which} budget ran out; "
                                             "ask me to go on.")
            n = len(body["messages"])
            return Step("calls", calls=[call("slow", {"seconds": 0.2}) if which == "seconds"
                                        else call("echo", {"text": f"step {n}"})])

        fake_llm.handler = model
        result = await app.service.handle(req("work hard"))
        assert result.stopped_by == f"budget:{which}" and result.error is None
        assert result.answer.startswith("Partial: I echoed a few steps")
        assert result.iterations < 10
        last = fake_llm.requests[-1]
        assert "tools" not in last and "budget of this turn" in last["messages"][-1]["content"]
        turn = await rows(app, "SELECT answer, stopped_by, status FROM turns WHERE id = :t", t=result.turn_id)
        assert (turn[0].answer, turn[0].stopped_by, turn[0].status) == (result.answer, f"budget:{which}", "limit")
    finally:
        await app.close()


def test_a_misspelt_budget_or_context_setting_stops_the_profile_with_its_line(tmp_path: Path):
    from bot.engine.errors import ProfileError
    from bot.engine.spec.profiles import ProfileLoader

    path = write_agent(tmp_path, "bad", "tools: [echo]\nbudget:\n  tokenz: 5")
    with pytest.raises(ProfileError, match=r"AGENT.md:4: budget.tokenz: unknown key"):
        ProfileLoader(tmp_path, registry()).load_file(path)
    path = write_agent(tmp_path, "bad2", "context_window: 100")
    with pytest.raises(ProfileError, match="context_window"):
        ProfileLoader(tmp_path, registry()).load_file(path)
    good = write_agent(tmp_path, "good", "context_window: 16384\ncontext: {compact_at: 0.4}\nbudget: {cost: 0.5}")
    profile = ProfileLoader(tmp_path, registry()).load_file(good)
    assert (profile.context_window, profile.context.compact_at, profile.budget.cost) == (16384, 0.4, 0.5)


async def test_compaction_and_reset_on_sqlite_and_postgresql(db_url: str, fake_llm: FakeOpenAI, tmp_path: Path):
    app = await make_app(db_url, fake_llm, tmp_path, "tools: [dump]\nmax_iterations: 4\ncontext_window: 6000")
    try:
        fake_llm.enforce_window(6000)
        fake_llm.handler = thread_model
        for n in range(1, 8):
            assert (await app.service.handle(req(f"question {n}"))).answer == f"Answer to question {n}"
        summaries = await rows(app, "SELECT kind, through_message_id, folded_turns FROM summaries ORDER BY id")
        assert summaries and all(s.kind == "summary" and s.through_message_id > 0 for s in summaries)
        before = len(fake_llm.requests)
        await app.service.handle(req("question 8"))
        assert "## Earlier in this conversation (summary)" in fake_llm.requests[before]["messages"][0]["content"]
        await app.service.handle(req("reset"))
        before = len(fake_llm.requests)
        await app.service.handle(req("question 9"))
        assert [m["role"] for m in fake_llm.requests[before]["messages"]] == ["system", "user"]
        assert "summary" not in fake_llm.requests[before]["messages"][0]["content"]
    finally:
        await app.close()


# --- the window a local server reports ---------------------------------------------------------------------
@pytest.mark.parametrize("flavour", ["vllm", "llamacpp"])
async def test_a_model_the_table_does_not_know_gets_the_window_its_server_reports(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, flavour: str
):
    """llama.cpp's `llama-server` serves "local"; vLLM any name: without the window they report, yokebot would
    assume 8,192 tokens and start compacting a thread the server still takes whole (32,768)."""
    model = f"local-{flavour}-model"
    fake_llm.models = [model]
    fake_llm.enforce_window(32_768, flavour)
    app = await make_app(sqlite_url, fake_llm, tmp_path, "tools: [dump]", model=model)
    block = "log line: upstream 10.0.0.7 answered 502 while reading the response header\n" * 60  # ~1,700 tokens
    try:
        for n in range(1, 7):  # ~10k tokens of thread by the sixth question
            fake_llm.reply(f"Answer {n}.")
            result = await app.service.handle(req(f"question {n}\n{block}"))
            assert result.error is None and result.answer == f"Answer {n}."
    finally:
        await app.close()
    assert not any(is_compaction(r) for r in fake_llm.requests)
    last = fake_llm.requests[-1]["messages"]
    assert [m["content"].split("\n")[0] for m in last if m["role"] == "user"] == [f"question {n}" for n in range(1, 7)]


def test_the_window_reported_beats_the_family_table_and_the_default_says_it_is_one():
    from bot.engine.context import learn_windows, window_source
    from bot.engine.model import reported_windows

    learn_windows(reported_windows([{"id": "qwen2.5-served-long", "max_model_len": 131_072}, {"id": "bare"},
                                    {"id": "cpp", "meta": {"n_ctx_train": 65_536}}, {"id": "odd", "meta": "x"}]))
    assert window_source("qwen2.5-served-long") == (131_072, "reported by the model endpoint")
    assert window_source("cpp")[0] == 65_536
    assert window_source("gpt-5-mini") == (400_000, "known for the gpt-5 family")
    assert window_source("bare")[1].startswith("a guess")
