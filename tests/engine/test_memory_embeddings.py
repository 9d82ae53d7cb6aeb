"""Memory recall with embeddings (YOKEBOT_EMBEDDING_MODEL) from the fake server's `/v1/embeddings`, through the
real openai SDK, the real `remember` tool and the real prompt, on SQLite and PostgreSQL: vectors are stored
beside the facts and fused with the keyword ranking; without the setting nothing is asked for; an endpoint that
fails leaves the keywords, with one log line, and the turn answers."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build_app
from bot.engine.service import TurnRequest
from tests.conftest import make_settings, rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import registry, write_agent

FACTS = [
    "the postgresql primary runs on db2",  # the oldest: shares no word with the question, only word parts
    "alice owns the nginx ingress",
    "deploys happen on Tuesdays",
    "grafana dashboards live in the ops folder",
]
QUESTION = "is postgres healthy?"


def req(text: str, thread: str) -> TurnRequest:
    return TurnRequest(platform="test", channel="C1", thread=thread, text=text, agent="keeper")


async def app_for(tmp_path: Path, db_url: str, fake_llm: FakeOpenAI, **settings: Any) -> App:
    agents = tmp_path / "agents"
    write_agent(agents, "keeper", "tools: [remember]\nmemory: {recall: 1}\n")
    return await build_app(make_settings(db_url, fake_llm, agents, **settings), registry=registry())


async def remember_and_ask(app: App, fake_llm: FakeOpenAI) -> str:
    """Remember the facts through the tool, ask the question; the memory section the question's prompt held."""
    fake_llm.calls(*(call("remember", {"fact": f}, f"r{i}") for i, f in enumerate(FACTS)))
    fake_llm.reply("noted")
    await app.service.handle(req("remember these", "t1"))
    fake_llm.reply("yes")
    await app.service.handle(req(QUESTION, "t2"))
    system: str = fake_llm.requests[-1]["messages"][0]["content"]
    return system.split("## Long-term memory", 1)[1]


async def test_embeddings_find_the_fact_the_keywords_miss(tmp_path: Path, db_url: str, fake_llm: FakeOpenAI):
    app = await app_for(tmp_path, db_url, fake_llm, embedding_model="fake-embed")
    try:
        memory = await remember_and_ask(app, fake_llm)
        stored = await rows(app, "SELECT embedding_model, embedding FROM memories")
    finally:
        await app.close()
    assert "the postgresql primary runs on db2" in memory
    assert [r.embedding_model for r in stored] == ["fake-embed"] * len(FACTS)
    assert all(len(r.embedding) == 256 * 4 for r in stored)  # float32s beside each fact
    asked = [b["input"] for b in fake_llm.embedding_requests]
    assert [QUESTION] in asked and all(b["model"] == "fake-embed" for b in fake_llm.embedding_requests)


async def test_without_an_embedding_model_nothing_is_asked_and_keywords_rank(
        tmp_path: Path, db_url: str, fake_llm: FakeOpenAI):
    app = await app_for(tmp_path, db_url, fake_llm)
    try:
        memory = await remember_and_ask(app, fake_llm)
    finally:
        await app.close()
    assert "grafana dashboards live in the ops folder" in memory  # no keyword matches: the newest
    assert fake_llm.embedding_requests == []


@pytest.mark.parametrize("status", [404, 500])
async def test_an_embeddings_endpoint_that_fails_leaves_the_keywords_with_one_log_line(
        tmp_path: Path, db_url: str, fake_llm: FakeOpenAI, caplog: pytest.LogCaptureFixture, status: int):
    fake_llm.embeddings_status = status
    app = await app_for(tmp_path, db_url, fake_llm, embedding_model="fake-embed")
    try:
        with caplog.at_level(logging.WARNING, logger="bot.engine.model.embeddings"):
            memory = await remember_and_ask(app, fake_llm)
        assert "grafana dashboards live in the ops folder" in memory
        assert fake_llm.requests[-1]["messages"][-1]["content"] == QUESTION  # the turn went on
        warnings = [r for r in caplog.records if r.name == "bot.engine.model.embeddings"]
        assert len(warnings) == 1 and "memories are ranked by keywords alone" in warnings[0].getMessage()
        assert [r.embedding for r in await rows(app, "SELECT embedding FROM memories")] == [None] * len(FACTS)

        fake_llm.embeddings_status = None  # back: the facts stored meanwhile get their vectors on the next recall
        fake_llm.reply("yes")
        await app.service.handle(req(QUESTION, "t3"))
        await app.store.memory.settled()  # the background vectors made and queued
        await app.store.flush()
        stored = await rows(app, "SELECT embedding_model FROM memories")
        assert [r.embedding_model for r in stored] == ["fake-embed"] * len(FACTS)
        fake_llm.reply("yes")
        await app.service.handle(req(QUESTION, "t4"))
        assert "the postgresql primary runs on db2" in fake_llm.requests[-1]["messages"][0]["content"]
    finally:
        await app.close()
