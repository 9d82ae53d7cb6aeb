"""The exact prompt the model receives, read from the fake server's recorded requests."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from bot.app import build_app
from bot.engine.context.prompt import truncate_history
from bot.engine.messages import Message, ToolCall
from bot.engine.service import TurnRequest
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import registry, unwrap, write_agent

FIXED = datetime(2026, 11, 30, 8, 15, tzinfo=UTC)


def req(text: str, agent: str = "writer", thread: str = "t") -> TurnRequest:
    return TurnRequest(platform="test", channel="C1", thread=thread, text=text, agent=agent)


async def test_system_prompt_order_memory_history_and_tools(tmp_path: Path, sqlite_url: str, fake_llm: FakeOpenAI):
    agents = tmp_path / "agents"
    write_agent(agents, "writer", """
timezone: Europe/Berlin
max_history_turns: 2
tools: [echo]
bootstrap: [TEAM.md]
skills: [haiku]
""", body="You are the writer.", files={
        "TEAM.md": "The team is called Blue.",
        "skills/haiku/SKILL.md": "---\nname: haiku\ndescription: write haiku\n---\nFive, seven, five.",
    })
    app = await build_app(make_settings(sqlite_url, fake_llm, agents), registry=registry(), clock=lambda: FIXED)
    try:
        await app.store.memory.remember("writer", None, "Deploys happen on Tuesdays.", None)
        await app.store.memory.remember("writer", "C1", "This channel is #blue-team.", None)
        await app.store.memory.remember("writer", "C-other", "Not for this channel.", None)
        await app.store.memory.remember("other-agent", None, "Not for this agent.", None)
        # four earlier turns, two of them with tool calls
        for i in range(4):
            if i % 2 == 0:
                fake_llm.calls(call("echo", {"text": f"t{i}"}, f"call_{i}"))
            fake_llm.reply(f"answer {i}")
            await app.service.handle(req(f"question {i}"))
        fake_llm.reply("final")
        await app.service.handle(req("question 4"))
    finally:
        await app.close()

    sent = fake_llm.requests[-1]
    system = sent["messages"][0]
    assert system["role"] == "system"
    text = system["content"]
    parts = ["You are the writer.", "## TEAM.md\n\nThe team is called Blue.", "## Skill: haiku\n_write haiku_",
             "Five, seven, five.", "Current date and time: Monday 2026-11-30 09:15 (Europe/Berlin, UTC+0100).",
             "## Long-term memory", "This channel is #blue-team.", "Deploys happen on Tuesdays."]  # newest first
    positions = [text.index(p) for p in parts]
    assert positions == sorted(positions)
    assert "Not for this channel" not in text and "Not for this agent" not in text
    # history: only the last 2 earlier turns (2 and 3) + the current one; turn 2's tool pair intact
    rest = [(m["role"], unwrap(m.get("content") or "") if m["role"] == "tool" else m.get("content"),
             m.get("tool_call_id")) for m in sent["messages"][1:]]
    assert rest == [
        ("user", "question 2", None), ("assistant", "", None), ("tool", "t2", "call_2"),
        ("assistant", "answer 2", None), ("user", "question 3", None), ("assistant", "answer 3", None),
        ("user", "question 4", None),
    ]
    assert sent["messages"][2]["tool_calls"][0]["id"] == "call_2"
    assert sent["tools"] == [{
        "type": "function",
        "function": {
            "name": "echo", "description": "Echo the text back. Use it in tests.",
            "parameters": {"type": "object", "additionalProperties": False, "required": ["text"],
                           "properties": {"text": {"type": "string"}, "times": {"type": "integer", "default": 1}}},
        },
    }]
    assert sent["model"] == "test-model"


def test_truncation_never_splits_a_tool_call_from_its_results():
    call_a = ToolCall("a", "echo", "{}")
    call_b = ToolCall("b", "echo", "{}")
    history = [
        Message.user("u1"), Message.assistant("", (call_a, call_b)), Message.tool("a", "echo", "ra"),
        Message.tool("b", "echo", "rb"), Message.assistant("done 1"),
        Message.user("u2"), Message.assistant("done 2"),
        Message.user("u3"),
    ]
    assert truncate_history(history, 1) == history[5:]
    assert truncate_history(history, 2) == history
    assert truncate_history(history, 0) == history[7:]


def test_a_turn_interrupted_mid_tool_is_repaired_for_the_next_request():
    call_a = ToolCall("a", "echo", "{}")
    history = [Message.user("u1"), Message.assistant("", (call_a,)), Message.tool("zzz", "echo", "stray"),
               Message.user("u2")]
    fixed = truncate_history(history, 5)
    assert [m.role for m in fixed] == ["user", "assistant", "tool", "user"]
    assert fixed[2].tool_call_id == "a" and "interrupted" in fixed[2].content


async def test_a_fact_remembered_in_a_turn_is_in_the_next_turns_prompt(tmp_path: Path, db_url: str,
                                                                       fake_llm: FakeOpenAI):
    """The memory read starts while the session opens, but only once the thread's locks are held: the next
    turn of the thread sees what the last one remembered (on both databases, across the write-behind)."""
    agents = tmp_path / "agents"
    write_agent(agents, "writer", "tools: [remember]\n", body="You are the writer.")
    app = await build_app(make_settings(db_url, fake_llm, agents), registry=registry(), clock=lambda: FIXED)
    try:
        fake_llm.calls(call("remember", {"fact": "The on-call phone is orange."}, "call_r"))
        fake_llm.reply("noted")
        fake_llm.reply("it is orange")
        first = asyncio.create_task(app.service.handle(req("remember the phone")))
        second = asyncio.create_task(app.service.handle(req("what colour is the phone?")))  # waits for the thread
        await asyncio.gather(first, second)
    finally:
        await app.close()
    system = fake_llm.requests[-1]["messages"][0]["content"]
    assert "The on-call phone is orange." in system
    assert "The on-call phone is orange." not in fake_llm.requests[0]["messages"][0]["content"]


async def test_a_thread_whose_session_is_another_agents_reads_that_agents_memories(
        tmp_path: Path, sqlite_url: str, fake_llm: FakeOpenAI):
    agents = tmp_path / "agents"
    write_agent(agents, "writer", "tools: [echo]\n", body="You are the writer.")
    write_agent(agents, "other", "tools: [echo]\n", body="You are the other.")
    app = await build_app(make_settings(sqlite_url, fake_llm, agents), registry=registry(), clock=lambda: FIXED)
    try:
        await app.store.memory.remember("writer", "C1", "Writer's fact.", None)
        await app.store.memory.remember("other", "C1", "Other's fact.", None)
        fake_llm.reply("one")
        fake_llm.reply("two")
        await app.service.handle(req("hello", agent="writer"))
        await app.service.handle(req("hello again", agent="other"))  # the thread's session stays the writer's
    finally:
        await app.close()
    system = fake_llm.requests[-1]["messages"][0]["content"]
    assert system.startswith("You are the writer.")
    assert "Writer's fact." in system and "Other's fact." not in system
