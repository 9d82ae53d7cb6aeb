"""The memory section of the real prompt, as the fake OpenAI server received it, on SQLite and PostgreSQL: the
facts `remember` stored, the most relevant to the message first, at most `memory: {recall: K}` within
`memory.max_tokens`, each through the same gate as a tool result."""

from __future__ import annotations

from pathlib import Path

from bot.app import build_app
from bot.engine.service import TurnRequest
from tests.conftest import make_settings, rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import registry, write_agent

FACTS = [
    "web3 is flaky on Mondays",
    "the payments database listens on port 5433",
    "alice owns the nginx ingress",
    "deploys happen on Tuesdays after standup",
    "grafana dashboards live in the ops folder",
]


def req(text: str, thread: str) -> TurnRequest:
    return TurnRequest(platform="test", channel="C1", thread=thread, text=text, agent="keeper")


def memory_lines(request: dict[str, object]) -> list[str]:
    system = request["messages"][0]["content"]  # type: ignore[index]
    assert isinstance(system, str)
    if "## Long-term memory" not in system:
        return []
    return [line for line in system.split("## Long-term memory", 1)[1].splitlines() if line.startswith("- [")]


async def test_the_prompt_holds_the_remembered_facts_most_relevant_to_the_message(
        tmp_path: Path, db_url: str, fake_llm: FakeOpenAI):
    agents = tmp_path / "agents"
    write_agent(agents, "keeper", "tools: [remember]\nmemory: {recall: 2}\n")
    app = await build_app(make_settings(db_url, fake_llm, agents), registry=registry())
    try:
        fake_llm.calls(*(call("remember", {"fact": f}, f"r{i}") for i, f in enumerate(FACTS)))
        fake_llm.reply("noted")
        await app.service.handle(req("remember these", "t1"))
        fake_llm.reply("alice")
        await app.service.handle(req("Who owns the NGINX ingress?", "t2"))
        fake_llm.reply("5433")
        # an alert's investigation: its text carries the alert's labels
        await app.service.handle(req("Alert PaymentsDBDown firing: {alertname=PaymentsDBDown, port=5433}", "t3"))
    finally:
        await app.close()
    first = memory_lines(fake_llm.requests[2])
    assert len(first) == 2 and "alice owns the nginx ingress (this channel)" in first[0]
    alert = memory_lines(fake_llm.requests[3])
    assert len(alert) == 2 and "the payments database listens on port 5433" in alert[0]
    recalls = {r.content: r.recalls for r in await _recalls(db_url, fake_llm, agents)}
    assert recalls["alice owns the nginx ingress"] == 1  # counted: written when the app closed
    assert recalls["the payments database listens on port 5433"] == 1


async def _recalls(db_url: str, fake_llm: FakeOpenAI, agents: Path) -> list[object]:
    app = await build_app(make_settings(db_url, fake_llm, agents), registry=registry())
    try:
        return await rows(app, "SELECT content, recalls FROM memories")
    finally:
        await app.close()


async def test_memories_pass_the_tool_result_gate_and_the_token_budget(
        tmp_path: Path, db_url: str, fake_llm: FakeOpenAI):
    agents = tmp_path / "agents"
    write_agent(agents, "keeper", "tools: [echo]\nmemory: {recall: 8, max_tokens: 100}\n")
    app = await build_app(make_settings(db_url, fake_llm, agents), registry=registry())
    try:
        memory = app.store.memory
        await memory.remember("keeper", "C1", "deploy token=sk-test-key-123 for web3 \x1b[31mred\x1b[0m\x07", None)
        await memory.remember("keeper", "C1", "web3 " + "very long " * 100, None)  # over the budget alone
        await memory.remember("keeper", "C1", "web3 sits behind the eu-west balancer", None)
        fake_llm.reply("ok")
        await app.service.handle(req("what about web3?", "t1"))
    finally:
        await app.close()
    lines = memory_lines(fake_llm.requests[0])
    assert len(lines) == 2 and all("very long" not in line for line in lines)
    secret = next(line for line in lines if "deploy" in line)
    assert "sk-test-key-123" not in secret and "[REDACTED]" in secret
    assert "\x1b" not in secret and "\x07" not in secret and "red" in secret


async def test_recall_zero_turns_the_memory_section_off(tmp_path: Path, sqlite_url: str, fake_llm: FakeOpenAI):
    agents = tmp_path / "agents"
    write_agent(agents, "keeper", "tools: [echo]\nmemory: {recall: 0}\n")
    app = await build_app(make_settings(sqlite_url, fake_llm, agents), registry=registry())
    try:
        await app.store.memory.remember("keeper", "C1", "web3 is flaky", None)
        fake_llm.reply("ok")
        await app.service.handle(req("web3?", "t1"))
    finally:
        await app.close()
    assert memory_lines(fake_llm.requests[0]) == []
