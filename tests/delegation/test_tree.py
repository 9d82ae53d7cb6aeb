"""The tree: depth, cycles, one budget, the loop guard, failures; through the real loop on both databases."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bot.app import App, build_app
from tests.conftest import make_settings, rows
from tests.delegation.conftest import ask, write_tree
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import registry, tool_messages


@asynccontextmanager
async def tree(db_url: str, fake_llm: FakeOpenAI, tmp_path: Path, **extra: str) -> AsyncIterator[App]:
    logs = tmp_path / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "error.log").write_text("boom 502\n")
    write_tree(tmp_path / "agents", logs, **extra)
    app = await build_app(make_settings(db_url, fake_llm, tmp_path / "agents", default_agent="lead"), registry=registry())
    try:
        yield app
    finally:
        await app.close()


def last_tool_text(fake_llm: FakeOpenAI, index: int) -> str:
    return tool_messages(fake_llm.requests[index])[-1]["content"]


async def test_depth_is_the_roots_limit_and_a_cycle_is_refused_at_any_depth(db_url: str, fake_llm: FakeOpenAI,
                                                                            tmp_path: Path):
    # logs may hand work on too, but the root allows one level only
    async with tree(db_url, fake_llm, tmp_path, logs_extra="delegate: [metrics, lead]") as app:
        fake_llm.calls(call("delegate", {"agent": "logs", "task": "check the log"}))
        fake_llm.calls(call("delegate", {"agent": "metrics", "task": "count requests"}))  # logs, one level too deep
        fake_llm.reply("I could not ask metrics.")
        fake_llm.reply("done")
        result = await app.service.handle(ask("go"))
        assert result.answer == "done"
        assert "sub-agents may go only 1 level(s) deep here (max_delegation_depth of lead)" in last_tool_text(fake_llm, 2)
        assert (await rows(app, "SELECT count(*) AS n FROM turns WHERE parent_turn_id IS NOT NULL"))[0].n == 1

    # three levels allowed: lead -> logs -> metrics runs; logs -> lead is a circle
    fake_llm.requests.clear()
    async with tree(db_url, fake_llm, tmp_path / "deep", lead="max_delegation_depth: 3",
                    logs_extra="delegate: [metrics, lead]") as app:
        fake_llm.calls(call("delegate", {"agent": "logs", "task": "check the log"}))
        fake_llm.calls(call("delegate", {"agent": "metrics", "task": "count requests"}),
                       call("delegate", {"agent": "lead", "task": "you do it"}))
        fake_llm.reply("40 requests a second")  # metrics, a grandchild
        fake_llm.reply("logs: 40 rps, and no circle")
        fake_llm.reply("all done")
        result = await app.service.handle(ask("go"))
        assert result.answer == "all done"
        to_logs = tool_messages(fake_llm.requests[3])
        assert to_logs[0]["content"] == "40 requests a second"
        assert "would go in a circle (lead → logs → lead)" in to_logs[1]["content"]
        turns = await rows(app, "SELECT t.id, t.parent_turn_id, s.agent FROM turns t JOIN sessions s "
                                "ON s.id = t.session_id ORDER BY t.started_at")
        by_agent = {t.agent: t for t in turns}
        assert by_agent["metrics"].parent_turn_id == by_agent["logs"].id
        assert by_agent["logs"].parent_turn_id == by_agent["lead"].id == result.turn_id


async def test_one_budget_over_the_tree_stops_the_sub_agent_and_then_the_parent(db_url: str, fake_llm: FakeOpenAI,
                                                                               tmp_path: Path):
    # lead may make 3 tool calls in all: the delegate call is one, so its sub-agent has 2 before it stops
    async with tree(db_url, fake_llm, tmp_path, lead="budget: {tool_calls: 3}", metrics_extra="max_iterations: 10"
                    ) as app:
        fake_llm.calls(call("current_time", {}))
        fake_llm.calls(call("delegate", {"agent": "metrics", "task": "echo a lot"}))
        fake_llm.calls(call("echo", {"text": "e0"}))  # the third call: then the sub-agent is out of calls
        fake_llm.reply("metrics: I echoed e0 once before the budget ran out")  # the sub-agent's last call, no tools
        fake_llm.reply("lead: the budget is spent; metrics got partway")  # the parent's last call, no tools
        result = await app.service.handle(ask("go"))

        assert result.stopped_by == "budget:tool_calls"
        assert result.answer == "lead: the budget is spent; metrics got partway"
        child = (await rows(app, "SELECT id, stopped_by, iterations FROM turns WHERE parent_turn_id = :p",
                            p=result.turn_id))[0]
        assert child.stopped_by == "budget:tool_calls"
        echoes = await rows(app, "SELECT tool FROM tool_invocations WHERE turn_id = :t", t=child.id)
        assert [e.tool for e in echoes] == ["echo"]  # current_time + delegate + one echo = 3
        assert "tool-call budget of the turn and its sub-agents (3 of 3 calls)" in \
            fake_llm.requests[-2]["messages"][-1]["content"]
        delegate = next(r for r in result.tool_calls if r.tool == "delegate")
        assert delegate.content.startswith("metrics: I echoed e0") and "the tool-call budget ran out" in delegate.content
        assert "tools" not in fake_llm.requests[-1]  # the parent stops too: its last call has no tools


async def test_a_token_budget_is_charged_as_the_sub_agent_goes(db_url: str, fake_llm: FakeOpenAI, tmp_path: Path):
    async with tree(db_url, fake_llm, tmp_path, lead="budget: {tokens: 40}", metrics_extra="max_iterations: 10"
                    ) as app:
        fake_llm.calls(call("delegate", {"agent": "metrics", "task": "echo a lot"}))  # 15 tokens
        fake_llm.calls(call("echo", {"text": "a"}))  # 30
        fake_llm.calls(call("echo", {"text": "b"}))  # 45: over, the sub-agent stops
        fake_llm.reply("metrics stopped")
        fake_llm.reply("lead stopped")
        result = await app.service.handle(ask("go"))
        assert result.stopped_by == "budget:tokens" and result.answer == "lead stopped"
        assert len(fake_llm.requests) == 5


async def test_the_loop_guard_treats_delegate_like_any_tool(db_url: str, fake_llm: FakeOpenAI, tmp_path: Path):
    async with tree(db_url, fake_llm, tmp_path, lead="loop_repeats: 2\nmax_iterations: 8") as app:
        same = {"agent": "metrics", "task": "how many requests?"}
        fake_llm.calls(call("delegate", same)).reply("40 rps")
        fake_llm.calls(call("delegate", same)).reply("40 rps")  # warned
        fake_llm.calls(call("delegate", same))  # stopped: not run
        fake_llm.reply("stopped repeating")
        result = await app.service.handle(ask("go"))
        assert result.stopped_by == "loop" and result.answer == "stopped repeating"
        assert "called delegate with the same arguments 2 times" in tool_messages(fake_llm.requests[4])[-1]["content"]
        assert len(await rows(app, "SELECT id FROM turns WHERE parent_turn_id = :p", p=result.turn_id)) == 2


async def test_a_sub_agent_that_fails_is_an_observation_and_the_parent_goes_on(db_url: str, fake_llm: FakeOpenAI,
                                                                              tmp_path: Path):
    async with tree(db_url, fake_llm, tmp_path) as app:
        fake_llm.calls(call("delegate", {"agent": "metrics", "task": "count"}))
        fake_llm.fail(400, message="the model refuses")  # the sub-agent's model call: not retried
        fake_llm.reply("metrics failed, so I answer from what I have")
        result = await app.service.handle(ask("go"))
        assert result.answer == "metrics failed, so I answer from what I have" and result.stopped_by == "answer"
        text = result.tool_calls[0].content
        assert "[metrics stopped before it finished: its model failed" in text
        child = (await rows(app, "SELECT status, stopped_by FROM turns WHERE parent_turn_id = :p", p=result.turn_id))[0]
        assert (child.status, child.stopped_by) == ("error", "error")


async def test_a_sub_agents_answer_passes_redaction_and_the_model_input_gate(db_url: str, fake_llm: FakeOpenAI,
                                                                            tmp_path: Path):
    async with tree(db_url, fake_llm, tmp_path) as app:
        fake_llm.calls(call("delegate", {"agent": "metrics", "task": "count"}))
        fake_llm.reply("token sk-live-abcdefghijklmnopqrstuvwx1234 \x1b]0;pwned\x07 done")
        fake_llm.reply("ok")
        result = await app.service.handle(ask("go"))
        seen = tool_messages(fake_llm.requests[2])[0]["content"]
        assert "sk-live-abcdefghijklmnopqrstuvwx1234" not in seen and "\x1b" not in seen and "done" in seen
        stored = await rows(app, "SELECT result FROM tool_invocations WHERE tool = 'delegate'")
        assert "sk-live-abcdefghijklmnopqrstuvwx1234" not in stored[0].result
        assert result.answer == "ok"




async def test_plan_mode_hands_a_step_to_a_sub_agent(db_url: str, fake_llm: FakeOpenAI, tmp_path: Path):
    async with tree(db_url, fake_llm, tmp_path, lead="mode: plan") as app:
        fake_llm.reply("1. Ask metrics for the request rate\n2. Say what it means")
        fake_llm.calls(call("delegate", {"agent": "metrics", "task": "What is the request rate now?"}, "d1"))
        fake_llm.reply("40 requests a second")  # metrics
        fake_llm.reply("metrics says 40 rps")  # step 1's finding
        fake_llm.reply("40 rps is normal")  # step 2
        result = await app.service.handle(ask("how busy are we?"))
        assert result.answer.splitlines()[1] == "1. Ask metrics for the request rate: metrics says 40 rps"
        assert [(c.tool, c.content) for c in result.tool_calls] == [("delegate", "40 requests a second")]
        child = await rows(app, "SELECT text FROM turns WHERE parent_turn_id = :p", p=result.turn_id)
        assert [c.text for c in child] == ["What is the request rate now?"]
