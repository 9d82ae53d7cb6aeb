"""Seed a database through real turns: build_app + AgentService, the real openai SDK, the scripted server."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.app import build_app
from bot.engine.service import TurnRequest
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import registry, write_agent

OTHER_AGENT = """
description: second agent on another model
model: other-model
tools: [echo]
"""


@dataclass
class Seeded:
    ops: str  # slack session: turn 1 echo ok + boom error, turn 2 the model fails (HTTP 500 x3)
    chat: str  # discord session of the `other` agent: one plain answer
    ops_turns: list[str]


def add_other_agent(agents_dir: Path) -> None:
    write_agent(agents_dir, "other", OTHER_AGENT)


async def seed(db_url: str, llm: FakeOpenAI, agents_dir: Path) -> Seeded:
    add_other_agent(agents_dir)
    app = await build_app(make_settings(db_url, llm, agents_dir), registry=registry())
    try:
        llm.calls(call("echo", {"text": "disk usage"}, "c-echo"),
                  call("boom", {"reason": "disk on fire"}, "c-boom"), content="Checking.", usage=(100, 20))
        llm.reply("The disk is on fire.", usage=(150, 30))
        first = await app.service.handle(TurnRequest("slack", "C-ops", "171.5", "how is the disk?", "tester",
                                                     trigger="mention", user="U-ada"))
        for _ in range(3):
            llm.fail(500)
        second = await app.service.handle(TurnRequest("slack", "C-ops", "171.5", "and now?", "tester",
                                                      trigger="thread", user="U-ada"))
        llm.reply("Hello from the other agent.", usage=(1000, 500))
        other = await app.service.handle(TurnRequest("discord", "D-general", "", "hi", "other", trigger="dm",
                                                     user="bob"))
    finally:
        await app.close()
    assert first.session_id == second.session_id and second.error
    return Seeded(first.session_id, other.session_id, [first.turn_id, second.turn_id])
