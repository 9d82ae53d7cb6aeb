"""notify (policy, dedup, no platform, broadcast pings) and remember/forget (scoped, bounded)."""

from __future__ import annotations

from pathlib import Path

from bot.chat.core.notifier import AdapterNotifier
from bot.engine.run.context import RunContext
from bot.tools.notify import LocalLedger, make_notify_tool
from tests.tools.conftest import Sandbox


def with_clock(sandbox: Sandbox) -> list[float]:
    now = [1000.0]
    sandbox.registry["notify"] = make_notify_tool(LocalLedger(clock=lambda: now[0]))
    sandbox._executor = sandbox.executor()
    return now


async def test_notify_posts_to_the_default_channel_through_the_chat_adapter(sandbox: Sandbox):
    result = await sandbox.call("notify", {"message": "nginx: 12x 502 since 10:00 (upstream app)"})
    assert result.status == "ok" and result.content == "Posted to slack:#ops-alerts (ref slack-msg-1)."
    assert sandbox.chat.posts == [("#ops-alerts", "nginx: 12x 502 since 10:00 (upstream app)")]


async def test_notify_may_use_another_allowed_channel_also_by_short_name(sandbox: Sandbox):
    await sandbox.call("notify", {"message": "page", "channel": "slack:#ops-oncall"})
    await sandbox.call("notify", {"message": "page 2", "channel": "#ops-oncall"})
    assert sandbox.chat.posts == [("#ops-oncall", "page"), ("#ops-oncall", "page 2")]


async def test_identical_alerts_within_the_window_are_not_reposted(sandbox: Sandbox):
    now = with_clock(sandbox)
    first = await sandbox.call("notify", {"message": "disk full on web1"})
    now[0] += 30
    again = await sandbox.call("notify", {"message": "disk  full on web1 "})
    other = await sandbox.call("notify", {"message": "disk full on web2"})
    assert other.content.startswith("Posted")
    assert first.status == again.status == "ok"
    assert again.content.startswith(
        "Not posted again: the same alert went to slack:#ops-alerts 30 s ago (ref slack-msg-1)"
    )
    now[0] += 600
    later = await sandbox.call("notify", {"message": "disk full on web1"})
    assert later.content.startswith("Posted")
    assert [t for _, t in sandbox.chat.posts] == [
        "disk full on web1",
        "disk full on web2",
        "disk full on web1",
    ]


async def test_without_a_platform_notify_fails_with_a_clear_message(sandbox: Sandbox):
    run = sandbox.run_context()
    bare = RunContext(run.session_id, run.turn_id, run.profile, run.scope, run.trigger, AdapterNotifier(), None)
    from bot.engine.messages import ToolCall

    result = await sandbox._executor.execute(ToolCall("c1", "notify", '{"message": "x"}'), bare)
    assert result.status == "error"
    assert "cannot post to slack:#ops-alerts: slack is not configured" in result.content
    no_notifier = RunContext(run.session_id, run.turn_id, run.profile, run.scope, run.trigger, None, None)
    result = await sandbox._executor.execute(ToolCall("c2", "notify", '{"message": "x"}'), no_notifier)
    assert result.status == "error" and "no chat platform is configured" in result.content
    # a failed post is not remembered as sent: the next try goes out
    ok = await sandbox.call("notify", {"message": "x"})
    assert ok.content.startswith("Posted") and sandbox.chat.posts == [("#ops-alerts", "x")]


async def test_long_alerts_are_refused(sandbox: Sandbox):
    # (broadcast pings are defused in the final platform text: tests/chat/test_broadcasts.py)
    long = await sandbox.call("notify", {"message": "x" * 5000})
    assert long.status == "error" and "keep alerts under 3000" in long.content


async def test_an_agent_without_notify_policy_is_denied(sandbox: Sandbox, tmp_path: Path):
    from dataclasses import replace

    from bot.tools.notify import NotifySettings

    sandbox.profile = replace(sandbox.profile, tools={**sandbox.profile.tools, "notify": NotifySettings()})
    result = await sandbox.call("notify", {"message": "x"})
    assert result.status == "denied" and "no notify channel configured" in result.content
    assert sandbox.chat.posts == []


async def test_remember_and_forget_are_scoped_and_bounded(sandbox: Sandbox, sqlite_url: str):
    from bot.store.db import create_engine, ensure_schema
    from bot.store.repositories import SqlStore

    engine = create_engine(sqlite_url)
    await ensure_schema(engine)
    store = SqlStore(engine)
    try:
        sandbox.memory = store.memory
        r = await sandbox.call("remember", {"fact": "  web3 is   flaky on Mondays "})
        assert r.content == "Remembered as [1]."
        assert (
            await sandbox.call("remember", {"fact": "web3 is flaky on Mondays"})
        ).content == "Already remembered as [1]."
        items = await store.memory.recall("sbx", "C-ops", "web3", 10)
        assert [(i.content, i.channel) for i in items] == [("web3 is flaky on Mondays", "C-ops")]

        sandbox.channel = "C-other"  # another channel neither sees nor forgets it
        r = await sandbox.call("forget", {"id": 1})
        assert r.status == "error" and "no remembered fact [1] in this channel" in r.content
        assert await store.memory.recall("sbx", "C-other", "web3", 10) == []
        sandbox.channel = "C-ops"
        assert (await sandbox.call("forget", {"id": 1})).content == "Forgot [1]."
        assert await store.memory.recall("sbx", "C-ops", "web3", 10) == []

        too_long = await sandbox.call("remember", {"fact": "y" * 600})
        assert too_long.status == "error" and "keep it under 500" in too_long.content
    finally:
        await store.close()
        await engine.dispose()


async def test_the_local_ledger_stays_bounded():
    from bot.engine.ports import AlertKey

    now = [0.0]
    ledger = LocalLedger(clock=lambda: now[0], max_entries=3)
    for i in range(10):
        now[0] += 1
        _, entry = await ledger.claim(AlertKey("a", "t", str(i), f"turn{i}", 1), 600, lambda h: True)
        assert entry is not None
        await ledger.posted(entry, "ref")
    assert [e.key.digest for e in ledger.sent] == ["7", "8", "9"]
