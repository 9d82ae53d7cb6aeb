"""Approval buttons in Discord, through real discord.py against the fake Discord: approve, deny, a click by
someone who may not decide, expiry, and a click after a restart; every click answered within 3 s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build_app
from bot.approvals.desk import ACTION_APPROVE, ACTION_DENY
from bot.chat.discord.adapter import DiscordAdapter
from tests.approvals.harness import approval_rows, fast, tool_rows
from tests.conftest import make_settings
from tests.fakes.discord_server import ALICE, BOB, CAROL, ONCALL_ROLE, FakeDiscord, Posted
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import RESTARTS, build_discord, eventually, registry, tool_messages, write_agent

TOKEN = "discord-test-token-0123456789"
AGENT = f"""
tools:
  restart_service:
    approval: {{approvers: ["{BOB}", "{ONCALL_ROLE}"], timeout: {{timeout}}}}
max_iterations: 4
"""


def gated(agents: Path, timeout: str = "30s") -> None:
    write_agent(agents, "tester", AGENT.replace("{timeout}", timeout))


async def start(db: str, llm: FakeOpenAI, agents: Path, fake: FakeDiscord, **over: Any) -> tuple[App, DiscordAdapter]:
    settings = make_settings(db, llm, agents, discord_bot_token=TOKEN, discord_api_url=fake.api_url,
                             discord_gateway_url=fake.gateway_url, discord_guild_ready_timeout=0.05, **over)
    app = await build_app(settings, registry=registry())
    adapter = build_discord(app)
    assert adapter is not None
    fast(app)
    await adapter.start(within=10)
    return app, adapter


async def stop(app: App, adapter: DiscordAdapter) -> None:
    await adapter.stop()
    await app.close()


async def request_message(fake: FakeDiscord, n: int = 1) -> tuple[Posted, int]:
    def found() -> list[Posted]:
        return [p for p in fake.posted if p.body.get("components")]

    posts = await eventually(lambda: len(found()) >= n and found(), what="the approval request in Discord")
    post = posts[n - 1]
    custom = post.body["components"][0]["components"][0]["custom_id"]
    return post, int(custom.rpartition(":")[2])


def texts(fake: FakeDiscord, channel: int) -> list[str]:
    return [p.content for p in fake.posted_in(channel)]


def edits(fake: FakeDiscord, post: Posted) -> list[Any]:
    suffix = f"/channels/{post.channel}/messages/{post.id}"
    return [body for method, path, body in fake.requests if method == "PATCH" and path == suffix]


@pytest.fixture
def script(fake_llm: FakeOpenAI) -> FakeOpenAI:
    RESTARTS.clear()
    fake_llm.calls(call("restart_service", {"service": "nginx"}, "call_restart")).reply("Done.")
    return fake_llm


async def test_approve_and_deny_by_button_each_answered_within_3_s(
    sqlite_url: str, script: FakeOpenAI, agents_dir: Path, fake_discord: FakeDiscord
):
    gated(agents_dir)
    app, adapter = await start(sqlite_url, script, agents_dir, fake_discord)
    try:
        asked = fake_discord.mention("restart nginx please", author=ALICE)
        post, approval_id = await request_message(fake_discord)
        assert post.channel == asked  # in the thread the bot opened on the message
        assert "restart_service" in post.content and '{"service": "nginx"}' in post.content
        labels = [c["label"] for c in post.body["components"][0]["components"]]
        assert labels == ["Approve", "Deny"]

        fake_discord.click(f"{ACTION_APPROVE}:{approval_id}", post, BOB)
        await eventually(lambda: "Done." in texts(fake_discord, asked), what="the answer")
        (cb,) = fake_discord.callbacks
        assert cb.type == 7 and cb.seconds < 3.0 and cb.data["components"] == []
        assert f"Approved by <@{BOB}>" in cb.data["content"]
        assert RESTARTS["nginx"] == 1
        assert tool_messages(script.requests[1])[0]["content"] == "nginx restarted (run 1)"
        (row,) = await approval_rows(app)
        assert (row.status, row.decided_by, row.outcome, row.requested_by) == ("approved", str(BOB), "ran",
                                                                                str(ALICE))
        assert [(t.status, t.reason) for t in await tool_rows(app)] == [("ok", f"approved by {BOB}")]

        script.calls(call("restart_service", {"service": "nginx"}, "call_again")).reply("Not done.")
        fake_discord.send_message(asked, "and again", author=ALICE)
        post2, second_id = await request_message(fake_discord, 2)
        fake_discord.click(f"{ACTION_DENY}:{second_id}", post2, ALICE)  # on call, but she asked: may not
        fake_discord.click(f"{ACTION_DENY}:{second_id}", post2, BOB)
        await eventually(lambda: "Not done." in texts(fake_discord, asked), what="the second answer")
        # discord.py handles each event in a task of its own: the two answers may come in either order, and
        # Alice's refusal may come after the turn's answer
        await eventually(lambda: len(fake_discord.callbacks) >= 3, what="both clicks answered")
        mine, bobs = sorted(fake_discord.callbacks[1:], key=lambda c: c.type)
        assert (mine.type, mine.ephemeral) == (4, True) and mine.data["content"].startswith("You may not approve")
        assert bobs.type == 7 and f"Denied by <@{BOB}>" in bobs.data["content"] and bobs.seconds < 3.0
        assert RESTARTS["nginx"] == 1
        assert "denied the request" in tool_messages(script.requests[3])[-1]["content"]
        assert [(t.status, t.reason) for t in await tool_rows(app)][1] == ("denied", f"denied by {BOB}")
    finally:
        await stop(app, adapter)


async def test_a_non_approver_is_told_privately_and_a_role_member_may_approve(
    sqlite_url: str, script: FakeOpenAI, agents_dir: Path, fake_discord: FakeDiscord
):
    gated(agents_dir)
    app, adapter = await start(sqlite_url, script, agents_dir, fake_discord)
    try:
        asked = fake_discord.mention("restart nginx please", author=BOB)  # Bob asks; Alice has the role
        post, approval_id = await request_message(fake_discord)
        fake_discord.click(f"{ACTION_APPROVE}:{approval_id}", post, CAROL)
        await eventually(lambda: fake_discord.callbacks, what="Carol's answer")
        (carol,) = fake_discord.callbacks
        assert (carol.type, carol.ephemeral) == (4, True) and carol.seconds < 3.0
        assert [r.status for r in await approval_rows(app)] == ["pending"] and RESTARTS["nginx"] == 0

        fake_discord.click(f"{ACTION_APPROVE}:{approval_id}", post, ALICE)
        await eventually(lambda: "Done." in texts(fake_discord, asked), what="the answer")
        assert fake_discord.callbacks[1].type == 7 and RESTARTS["nginx"] == 1
        assert [(t.status, t.reason) for t in await tool_rows(app)] == [("ok", f"approved by {ALICE}")]
    finally:
        await stop(app, adapter)


async def test_an_unanswered_request_expires_and_the_thread_is_told(
    sqlite_url: str, script: FakeOpenAI, agents_dir: Path, fake_discord: FakeDiscord
):
    gated(agents_dir, "1s")
    app, adapter = await start(sqlite_url, script, agents_dir, fake_discord)
    try:
        asked = fake_discord.mention("restart nginx please", author=ALICE)
        post, approval_id = await request_message(fake_discord)
        await eventually(lambda: "Done." in texts(fake_discord, asked), what="the answer")
        assert any("Nobody approved `restart_service` within 1 s" in t for t in texts(fake_discord, asked))
        assert any("Expired at" in (e or {}).get("content", "") for e in edits(fake_discord, post))
        assert [(t.status, t.reason) for t in await tool_rows(app)] == [("denied", "approval expired")]
        fake_discord.click(f"{ACTION_APPROVE}:{approval_id}", post, BOB)  # too late
        await eventually(lambda: fake_discord.callbacks, what="the late click's answer")
        assert fake_discord.callbacks[0].ephemeral and RESTARTS["nginx"] == 0
    finally:
        await stop(app, adapter)


async def test_a_click_after_a_restart_resumes_the_parked_turn_and_the_call_runs_once(
    sqlite_url: str, script: FakeOpenAI, agents_dir: Path, fake_discord: FakeDiscord
):
    """The turn parked on the request (no task, no slot): a stop and a start lose nothing; the click on the new
    process resumes it from its stored state, the call runs once, and the thread gets the answer."""
    gated(agents_dir)
    app, adapter = await start(sqlite_url, script, agents_dir, fake_discord, discord_drain_seconds=0.2)
    asked = fake_discord.mention("restart nginx please", author=ALICE)
    post, approval_id = await request_message(fake_discord)
    await eventually(lambda: adapter.pipeline.busy == 0, what="the turn parked (its task ended)")
    await stop(app, adapter)

    app, adapter = await start(sqlite_url, script, agents_dir, fake_discord)
    try:
        fake_discord.click(f"{ACTION_APPROVE}:{approval_id}", post, BOB, to=-1)  # the new connection
        await eventually(lambda: "Done." in texts(fake_discord, asked), what="the answer of the resumed turn")
        assert fake_discord.callbacks[0].type == 7 and RESTARTS["nginx"] == 1
        assert tool_messages(script.requests[1])[0]["content"] == "nginx restarted (run 1)"
        assert len(script.requests) == 2  # the model was not asked again from scratch
        assert [p for p in fake_discord.posted if p.body.get("components")] == [post]  # one request
        assert not any("restarted" in t or "no longer running" in t for t in texts(fake_discord, asked))
        (row,) = await approval_rows(app)
        assert (row.status, row.decided_by, row.outcome) == ("approved", str(BOB), "ran")
        assert [(t.status, t.reason) for t in await tool_rows(app)] == [("ok", f"approved by {BOB}")]
    finally:
        await stop(app, adapter)


async def test_a_request_whose_arguments_read_as_a_broadcast_pings_nobody(
    sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_discord: FakeDiscord
):
    """The request quotes model-chosen arguments: they pass Discord's one message gate, which defuses
    @everyone / @here, as every other text the bot sends does (before, only allowed_mentions guarded it)."""
    RESTARTS.clear()
    fake_llm.calls(call("restart_service", {"service": "@everyone nginx"}, "call_ping")).reply("Not done.")
    gated(agents_dir)
    app, adapter = await start(sqlite_url, fake_llm, agents_dir, fake_discord)
    try:
        fake_discord.mention("restart nginx please", author=ALICE)
        post, approval_id = await request_message(fake_discord)
        assert "everyone nginx" in post.content and "@everyone" not in post.content
        fake_discord.click(f"{ACTION_DENY}:{approval_id}", post, BOB)
        await eventually(lambda: fake_discord.callbacks, what="the click's answer")
        assert "@everyone" not in fake_discord.callbacks[0].data["content"]
    finally:
        await stop(app, adapter)
