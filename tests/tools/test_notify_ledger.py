"""notify's limits and dedup window live in the database (`notify_ledger`), so they hold across instances: two
apps on one PostgreSQL database sending to one channel share one per-channel limit and one dedup window, and
parallel notify calls in one model reply honour the limit exactly (SQLite and PostgreSQL). Through AgentService
-> ReActLoop -> the real openai SDK -> the fake server; the ledger itself also under concurrent claims."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build_app
from bot.engine.ports import AlertHistory, AlertKey
from bot.engine.service import TurnRequest
from bot.store.db import create_engine
from bot.store.notify_ledger import SqlNotifyLedger
from bot.tools.notify import digest
from tests.conftest import make_settings, rows
from tests.fakes.openai_server import FakeOpenAI, Step, call
from tests.helpers import registry, tool_messages, write_agent
from tests.tools.conftest import RecordingChat

AGENT = """
description: alerts
tools:
  notify: {max_per_reply: 10, max_per_turn: 10, max_per_channel_per_minute: 3}
notify:
  default: "slack:#ops-alerts"
  dedup_window_seconds: 600
"""


def alerts_model(body: dict[str, Any]) -> Step:
    """The user's message lists the alerts, `;`-separated: one reply with a notify call for each, then done."""
    last = body["messages"][-1]
    if last["role"] == "user":
        texts = last["content"].split(";")
        return Step("calls", calls=[call("notify", {"message": t.strip()}) for t in texts])
    return Step("reply", content="done")


async def start(url: str, llm: FakeOpenAI, agents: Path) -> tuple[App, RecordingChat]:
    app = await build_app(make_settings(url, llm, agents), registry=registry())
    chat = RecordingChat()
    app.notifier.register(chat)  # type: ignore[arg-type]
    return app, chat


def req(text: str, thread: str) -> TurnRequest:
    return TurnRequest("slack", "C1", thread, text, "alerts")


@pytest.fixture
async def two(pg_database: str, fake_llm: FakeOpenAI, agents_dir: Path) -> AsyncIterator[list[tuple[App, RecordingChat]]]:
    """Two instances (two apps, each with its own engine and its own notify tool) on one PostgreSQL database."""
    write_agent(agents_dir, "alerts", AGENT)
    fake_llm.handler = alerts_model
    apps = [await start(pg_database, fake_llm, agents_dir) for _ in range(2)]
    yield apps
    for app, _ in apps:
        await app.close()


@pytest.mark.postgres
async def test_two_instances_share_one_per_channel_limit_and_one_dedup_window(
    two: list[tuple[App, RecordingChat]], fake_llm: FakeOpenAI
):
    (first, first_chat), (second, second_chat) = two
    await first.service.handle(req("disk full on web1; disk full on web2", "t1"))
    await second.service.handle(req("disk full on web1; disk full on web3; disk full on web4", "t2"))
    assert [t for _, t in first_chat.posts] == ["disk full on web1", "disk full on web2"]
    assert [t for _, t in second_chat.posts] == ["disk full on web3"]  # the channel's third this minute
    seen = [m["content"] for m in tool_messages(fake_llm.requests[-1])]
    assert re.fullmatch(r"Not posted again: the same alert went to slack:#ops-alerts [01] s ago \(ref slack-msg-1\); "
                        r"identical alerts within 600 s are suppressed\.", seen[0]), seen[0]  # 1 s on a slow run
    assert seen[1] == "Posted to slack:#ops-alerts (ref slack-msg-1)."
    assert seen[2].startswith("Denied by the sandbox: notify limit reached: 3 alerts went to slack:#ops-alerts "
                              "in the last minute (max_per_channel_per_minute 3); nothing was posted.")
    ledger = await rows(first, "SELECT target, state, ref FROM notify_ledger ORDER BY id")
    assert [(r.target, r.state) for r in ledger] == [("slack:#ops-alerts", "posted")] * 3


@pytest.mark.postgres
@pytest.mark.parametrize("attempt", range(2))
async def test_two_instances_sending_at_once_post_exactly_the_limit(
    two: list[tuple[App, RecordingChat]], attempt: int
):
    (first, first_chat), (second, second_chat) = two
    await asyncio.gather(first.service.handle(req("a1; a2; a3; same alert", "t1")),
                         second.service.handle(req("same alert; b1; b2; b3", "t2")))
    posted = [t for _, t in first_chat.posts + second_chat.posts]
    assert len(posted) == 3, posted  # per process it would be 3 + 3
    assert posted.count("same alert") <= 1
    assert len(await rows(first, "SELECT id FROM notify_ledger")) == 3


async def test_parallel_notify_calls_in_one_reply_honour_the_limit_exactly(
    db_url: str, fake_llm: FakeOpenAI, agents_dir: Path
):
    write_agent(agents_dir, "alerts", AGENT.replace("max_per_reply: 10", "max_per_reply: 2"))
    fake_llm.handler = alerts_model
    app, chat = await start(db_url, fake_llm, agents_dir)
    try:
        await app.service.handle(req("; ".join(f"host web{i} is down" for i in range(6)), "t1"))
        audit = await rows(app, "SELECT status, reason FROM tool_invocations ORDER BY id")
        ledger = await rows(app, "SELECT state FROM notify_ledger")
    finally:
        await app.close()
    assert [t for _, t in chat.posts] == ["host web0 is down", "host web1 is down"]
    assert [a.status for a in audit] == ["ok", "ok"] + ["denied"] * 4
    assert all("(max_per_reply 2)" in (a.reason or "") for a in audit[2:])
    assert [r.state for r in ledger] == ["posted", "posted"]  # refused calls leave no entry


def key(text: str, turn: str = "turn1", reply: int = 1, target: str = "slack:#ops") -> AlertKey:
    return AlertKey("alerts", target, digest(text), turn, reply)


async def test_concurrent_claims_from_eight_instances_admit_exactly_three(db_url: str, any_bot: App):
    """Eight ledgers on eight engines (no lock shared in this process): the database alone keeps the count.
    Each engine has its connection open first, so the claims of a round reach the database together."""
    from sqlalchemy import text

    engines = [create_engine(db_url) for _ in range(8)]
    try:
        for engine in engines:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        ledgers = [SqlNotifyLedger(e) for e in engines]

        def under_three(h: AlertHistory) -> bool:
            return h.to_target < 3

        admitted: list[int] = []
        for round_ in range(5):
            target = f"slack:#round{round_}"
            results = await asyncio.gather(*(
                ledger.claim(key(f"alert {i}", f"turn{round_}-{i}", target=target), 600, under_three)
                for i, ledger in enumerate(ledgers)))
            admitted.append(sum(entry is not None for _, entry in results))
    finally:
        for engine in engines:
            await engine.dispose()
    assert admitted == [3] * 5
    assert len(await rows(any_bot, "SELECT id FROM notify_ledger")) == 15


async def test_the_ledger_forgets_by_the_window_and_the_minute(any_bot: App):
    now = [datetime(2026, 12, 1, 10, 0, tzinfo=UTC)]
    ledger = SqlNotifyLedger(any_bot.engine, clock=lambda: now[0])
    history, first = await ledger.claim(key("disk full"), 600, lambda h: True)
    assert history == AlertHistory() and first is not None
    same, _ = await ledger.claim(key("disk  full "), 600, lambda h: h.same_ago is None)
    assert same.same_ago == 0 and same.same_ref is None  # still being posted
    await ledger.posted(first, "slack-msg-1")
    now[0] += timedelta(seconds=30)
    same, entry = await ledger.claim(key("disk full", reply=2), 600, lambda h: h.same_ago is None)
    assert (same.same_ago, same.same_ref, entry) == (30, "slack-msg-1", None)
    assert (same.this_reply, same.this_turn, same.to_target) == (0, 1, 1)
    now[0] += timedelta(seconds=31)  # a minute after the first: out of the per-minute count
    later, entry = await ledger.claim(key("disk full", turn="turn2"), 60, lambda h: True)
    assert later.same_ago is None and later.to_target == 0 and entry is not None
    await ledger.failed(entry)  # a failed post counts for the limits, not for the dedup window
    retry, _ = await ledger.claim(key("disk full", turn="turn2"), 60, lambda h: True)
    assert retry.same_ago is None and (retry.this_turn, retry.to_target) == (1, 1)
