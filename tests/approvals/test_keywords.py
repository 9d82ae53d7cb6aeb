"""Approver entries are typed once, at load: the keyword `requester` (whoever asked) is not an ID, so a clicker
whose ID is the literal word `requester` is not that approver (security issue 37, finding 6). Through the real
Slack and Discord click paths, across a restart (the parked turn's row read back), on both databases."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from bot.app import App
from bot.approvals.desk import ACTION_APPROVE, ApproverKind
from bot.approvals.store import ApprovalStore, NewApproval
from bot.engine.spec.approval import (
    ApprovalSpec,
    PlatformId,
    Requester,
    dump_approvers,
    load_approvers,
    may_approve,
    parse_approver,
)
from bot.store.models import utcnow
from tests.approvals.harness import approval_rows, blocks_of, fast, slack_request, tool_rows
from tests.approvals.test_discord import request_message, start, stop, texts
from tests.approvals.test_slack import ASK_TS, click
from tests.chat.slack_harness import ALICE, MALLORY, answered, mention, start_bot
from tests.conftest import rows
from tests.fakes.discord_server import ALICE as D_ALICE
from tests.fakes.discord_server import BOB as D_BOB
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, call
from tests.fakes.slack_server import FakeSlack
from tests.helpers import RESTARTS, eventually, write_agent

KEYWORD_USER = "requester"  # a clicker whose platform ID is spelled like the keyword

REQUESTER_AGENT = """
tools:
  restart_service:
    approval: {approvers: [requester, U_BOSS], timeout: 5m, self_approve: true}
max_iterations: 4
"""


@pytest.fixture
def script(fake_llm: FakeOpenAI) -> FakeOpenAI:
    RESTARTS.clear()
    fake_llm.calls(call("restart_service", {"service": "nginx"}, "call_restart")).reply("Done.")
    return fake_llm


def slack_kind(who: str) -> ApproverKind:
    return "user" if who[:1] in ("U", "W") else "group" if who[:1] == "S" else "either"


def discord_kind(who: str) -> ApproverKind:
    return "either"


@pytest.mark.parametrize("kind", [slack_kind, discord_kind])
def test_the_keyword_matches_only_whoever_asked_never_an_id_or_a_group_spelled_like_it(kind):
    keyword_only = (Requester(),)
    assert may_approve(keyword_only, True, "U_ALICE", "U_ALICE", frozenset(), kind)
    assert not may_approve(keyword_only, True, "U_ALICE", KEYWORD_USER, frozenset(), kind)
    assert not may_approve(keyword_only, True, "U_ALICE", "U_MALLORY", frozenset({KEYWORD_USER}), kind)
    assert not may_approve(keyword_only, True, None, KEYWORD_USER, frozenset(), kind)  # a scheduled run
    assert not may_approve(keyword_only, False, "U_ALICE", "U_ALICE", frozenset(), kind)  # self_approve: false
    # an ID entry still matches its user, with the keyword next to it
    assert may_approve((Requester(), PlatformId("U_BOSS")), False, "U_ALICE", "U_BOSS", frozenset(), kind)


def test_entries_are_parsed_once_into_kinds_and_an_id_cannot_be_spelled_as_a_keyword():
    spec = ApprovalSpec(approvers=("requester", "U_BOSS", "S_ONCALL", "123456789012345678"))  # type: ignore[arg-type]
    assert spec.approvers == (Requester(), PlatformId("U_BOSS"), PlatformId("S_ONCALL"),
                              PlatformId("123456789012345678"))
    assert spec.model_dump(mode="json")["approvers"] == ["requester", "U_BOSS", "S_ONCALL", "123456789012345678"]
    with pytest.raises(ValueError, match="'requester' is a keyword, not an ID"):
        PlatformId(KEYWORD_USER)
    for bad in ("Requester", "requester ", "alice", 123456789012345678):
        with pytest.raises(ValueError, match="is not an approver"):
            parse_approver(bad)


async def test_stored_approvers_keep_their_on_disk_form_and_read_back_typed(any_bot: App):
    """The `approvals.approvers` JSON column stays a list of strings (rows of earlier releases read the same)."""
    store = ApprovalStore(any_bot.engine)
    session = await any_bot.store.session_for("slack", "C1", "1.0", "tester")
    approval_id = await store.create(NewApproval(
        session.id, "t1", "tester", "c1", "restart_service", "{}", "U_ALICE", [Requester(), PlatformId("U_BOSS")],
        True, "slack", "C1", "1.0", utcnow() + timedelta(minutes=5)))
    (stored,) = await rows(any_bot, "SELECT approvers FROM approvals WHERE id = :i", i=approval_id)
    raw = stored.approvers
    assert (json.loads(raw) if isinstance(raw, str) else raw) == ["requester", "U_BOSS"]
    row = await store.get(approval_id)
    assert row is not None and row.approvers == (Requester(), PlatformId("U_BOSS"))
    assert load_approvers(["requester", "U_BOSS"]) == row.approvers
    assert dump_approvers(row.approvers) == ["requester", "U_BOSS"]


async def test_a_slack_click_by_the_user_id_requester_is_not_the_requester_even_after_a_restart(
    fake_slack: FakeSlack, script: FakeOpenAI, db_url: str, agents_dir: Path
):
    """Alice asks; the approvers are `requester` (self-approval on) and U_BOSS. A click whose user ID is the word
    `requester` is refused privately, on the process that posted the request and on the one after a restart
    (which reads the approvers back from the row); Alice's own click then runs the call once."""
    write_agent(agents_dir, "tester", REQUESTER_AGENT)
    first = await start_bot(fake_slack, script, db_url, agents_dir, slack_drain_seconds=0.2)
    fast(first.app)
    try:
        await first.deliver(mention("restart nginx please", ASK_TS))
        _, ts, approval_id = await slack_request(fake_slack)
        request = next(c for c in fake_slack.calls_to("chat.postMessage") if c.result["ts"] == ts)
        assert "Who may approve: the requester, <@U_BOSS>" in json.dumps(blocks_of(request))
        await click(first, KEYWORD_USER, ACTION_APPROVE, approval_id, ts)
        ephemeral = await eventually(lambda: fake_slack.calls_to("chat.postEphemeral"), what="a private answer")
        assert ephemeral[0].params["user"] == KEYWORD_USER
        assert ephemeral[0].params["text"].startswith("You may not approve this request")
        assert [r.status for r in await approval_rows(first.app)] == ["pending"] and RESTARTS["nginx"] == 0
        await eventually(lambda: first.adapter.pipeline.busy == 0, what="the turn parked")
    finally:
        await first.stop()

    second = await start_bot(fake_slack, script, db_url, agents_dir, mode="http")
    fast(second.app)
    try:
        await click(second, KEYWORD_USER, ACTION_APPROVE, approval_id, ts)  # signed HTTP this time
        await click(second, MALLORY, ACTION_APPROVE, approval_id, ts)
        await eventually(lambda: len(fake_slack.calls_to("chat.postEphemeral")) == 3, what="two more answers")
        assert all(c.params["text"].startswith("You may not approve")
                   for c in fake_slack.calls_to("chat.postEphemeral"))
        assert [r.status for r in await approval_rows(second.app)] == ["pending"] and RESTARTS["nginx"] == 0

        await click(second, ALICE, ACTION_APPROVE, approval_id, ts)  # the requester herself: the keyword's meaning
        await answered(fake_slack, ASK_TS)
        assert RESTARTS["nginx"] == 1
        (row,) = await approval_rows(second.app)
        assert (row.status, row.decided_by, row.outcome) == ("approved", ALICE, "ran")
        assert [(t.status, t.reason) for t in await tool_rows(second.app)] == [("ok", f"approved by {ALICE}")]
        (stored,) = await rows(second.app, "SELECT approvers FROM approvals")
        raw = stored.approvers
        assert (json.loads(raw) if isinstance(raw, str) else raw) == ["requester", "U_BOSS"]
    finally:
        await second.stop()


async def test_in_discord_the_keyword_lets_only_whoever_asked_decide(
    db_url: str, script: FakeOpenAI, agents_dir: Path, fake_discord: FakeDiscord
):
    """Discord IDs are snowflakes (discord.py reads them as integers), so no clicker's ID can be the word; the
    keyword still means the requester's ID only: Bob, who did not ask, is refused; Alice, who asked, decides."""
    write_agent(agents_dir, "tester", REQUESTER_AGENT.replace("U_BOSS", '"123456789012345678"'))
    app, adapter = await start(db_url, script, agents_dir, fake_discord)
    try:
        asked = fake_discord.mention("restart nginx please", author=D_ALICE)
        post, approval_id = await request_message(fake_discord)
        assert "Who may approve: the requester, `123456789012345678`" in post.content
        fake_discord.click(f"{ACTION_APPROVE}:{approval_id}", post, D_BOB)
        await eventually(lambda: fake_discord.callbacks, what="Bob's answer")
        assert fake_discord.callbacks[0].ephemeral
        assert fake_discord.callbacks[0].data["content"].startswith("You may not approve")
        assert [r.status for r in await approval_rows(app)] == ["pending"] and RESTARTS["nginx"] == 0

        fake_discord.click(f"{ACTION_APPROVE}:{approval_id}", post, D_ALICE)
        await eventually(lambda: "Done." in texts(fake_discord, asked), what="the answer")
        assert RESTARTS["nginx"] == 1
        assert [(t.status, t.reason) for t in await tool_rows(app)] == [("ok", f"approved by {D_ALICE}")]
    finally:
        await stop(app, adapter)
