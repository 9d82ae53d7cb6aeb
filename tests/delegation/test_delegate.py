"""Delegation through the real loop, tools, openai SDK and fake server, audited in SQL on both databases."""

from __future__ import annotations

import json
from pathlib import Path

from bot.app import App
from bot.observability.queries import trace
from bot.observability.render import trace_dict
from tests.conftest import rows
from tests.delegation.conftest import LOG_LINE, ask
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import tool_messages


def tool_names(request: dict[str, object]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]  # type: ignore[union-attr, index]


async def test_a_parent_without_tail_log_gets_a_log_line_through_its_sub_agent(
        tree_bot: App, fake_llm: FakeOpenAI, tree_dirs: tuple[Path, Path]):
    log = tree_dirs[1] / "error.log"
    fake_llm.calls(call("delegate", {"agent": "logs", "task": f"Find the 502 in {log} and quote it."}, "call_d"))
    fake_llm.calls(call("tail_log", {"path": str(log), "contains": "502"}, "call_t"))
    fake_llm.reply(f"The 502: {LOG_LINE}")
    fake_llm.reply(f"The orders API answered 502 once: `{LOG_LINE}`.")

    result = await tree_bot.service.handle(ask("Is anything failing? Check the nginx error log."))

    assert LOG_LINE in result.answer and result.stopped_by == "answer"
    parent_first, child_first, child_second, parent_second = fake_llm.requests
    # the parent has delegate, not tail_log; the schema names the allowed agents and says what each does
    assert tool_names(parent_first) == ["current_time", "delegate"]
    schema = parent_first["tools"][1]["function"]
    assert schema["parameters"]["properties"]["agent"]["enum"] == ["logs", "metrics"]
    assert "logs (reads the nginx logs and quotes the lines that matter)" in schema["description"]
    # the sub-agent runs its own profile, in a fresh context that holds only the task
    assert tool_names(child_first) == ["tail_log"]
    assert [(m["role"], m["content"]) for m in child_first["messages"]] == [
        ("system", child_first["messages"][0]["content"]), ("user", f"Find the 502 in {log} and quote it.")]
    assert "You are the logs agent" in child_first["messages"][0]["content"]
    assert "Is anything failing" not in json.dumps(child_first)
    assert LOG_LINE in tool_messages(child_second)[0]["content"]
    # the parent reads the sub-agent's answer as the delegate call's result (`ask --json` lists it so)
    assert tool_messages(parent_second) == [{"role": "tool", "tool_call_id": "call_d", "content": f"The 502: {LOG_LINE}"}]
    assert [(c["tool"], c["status"], c["result"]) for c in json.loads(result.to_json())["tool_calls"]] == [
        ("delegate", "ok", f"The 502: {LOG_LINE}")]

    # the audit: the child turn names its parent turn and call; its rows carry both turns
    child = (await rows(tree_bot, "SELECT id, session_id, status, parent_turn_id, parent_call_id, text, iterations "
                                  "FROM turns WHERE parent_turn_id = :p", p=result.turn_id))
    assert len(child) == 1 and child[0].parent_call_id == "call_d" and child[0].status == "ok"
    assert child[0].session_id != result.session_id and child[0].iterations == 2
    llm = await rows(tree_bot, "SELECT turn_id, agent, parent_turn_id FROM llm_calls ORDER BY id")
    assert [(r.turn_id, r.agent, r.parent_turn_id) for r in llm] == [
        (result.turn_id, "lead", None), (child[0].id, "logs", result.turn_id), (child[0].id, "logs", result.turn_id),
        (result.turn_id, "lead", None)]
    tools = await rows(tree_bot, "SELECT tool, turn_id, agent, parent_turn_id FROM tool_invocations ORDER BY id")
    assert [(t.tool, t.turn_id, t.agent, t.parent_turn_id) for t in tools] == [
        ("tail_log", child[0].id, "logs", result.turn_id), ("delegate", result.turn_id, "lead", None)]
    # the parent's history holds its own messages only
    roles = await rows(tree_bot, "SELECT role, name FROM messages WHERE session_id = :s ORDER BY id", s=result.session_id)
    assert [(r.role, r.name) for r in roles] == [("user", None), ("assistant", None), ("tool", "delegate"),
                                                 ("assistant", None)]

    # trace --json: the child turn under the parent's delegate call, with its own model and tool calls
    tr = trace_dict(await trace(tree_bot.engine, result.session_id))
    delegate_step = tr["turns"][0]["steps"][0]["tools"][0]
    assert delegate_step["tool"] == "delegate"
    sub = delegate_step["child"]
    assert sub["agent"] == "logs" and sub["text"] == f"Find the 502 in {log} and quote it."
    assert [t["tool"] for s in sub["steps"] for t in s["tools"]] == ["tail_log"]


async def test_bad_delegations_are_observations_and_the_parent_goes_on(tree_bot: App, fake_llm: FakeOpenAI):
    fake_llm.calls(call("delegate", {"agent": "billing", "task": "x"}, "c1"),
                   call("delegate", {"agent": "lead", "task": "x"}, "c2"),
                   call("delegate", {"agent": "logs", "task": "   "}, "c3"),
                   call("delegate", {"agent": "metrics", "task": "word " * 200_000}, "c4"))
    fake_llm.reply("I could not hand any of it on.")

    result = await tree_bot.service.handle(ask("try everything"))

    assert result.answer == "I could not hand any of it on."
    unknown, itself, empty, huge = (r.content for r in result.tool_calls)
    assert "no sub-agent named 'billing'" in unknown
    assert "logs (reads the nginx logs and quotes the lines that matter)" in unknown and "metrics (" in unknown
    assert "no sub-agent named 'lead'" in itself  # not in its own delegate list
    assert "task is empty" in empty
    assert "context window" in huge
    assert {r.status for r in result.tool_calls} == {"error"}
    assert len(fake_llm.requests) == 2  # no sub-agent ran
    assert await rows(tree_bot, "SELECT id FROM turns WHERE parent_turn_id IS NOT NULL") == []
