"""Approval buttons in Mattermost (interactive message buttons): the fake Mattermost server calls the button's
integration URL on yokebot's HTTP server (/mattermost/actions) as Mattermost does, with the context it keeps for
the button. A right secret and an approver: decided and run; a wrong secret: 403, nothing decided; someone
who may not decide: told privately, nothing decided; a broadcast in the arguments pings nobody."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.approvals.harness import approval_rows, fast, tool_rows
from tests.chat.mattermost_harness import mattermost, mm_settings
from tests.fakes.mattermost import ALICE, BOB, CAROL, TOWN, FakeMattermost
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import RESTARTS, eventually, free_port, tool_messages, write_agent

AGENT = f"""
description: gated
tools:
  restart_service:
    approval: {{approvers: ["{BOB}"], timeout: 30s}}
max_iterations: 4
"""


def settings(db: str, llm: FakeOpenAI, agents: Path, fake: FakeMattermost) -> Any:
    write_agent(agents, "tester", AGENT)
    return mm_settings(db, llm, agents, fake, mattermost_actions_url=f"http://127.0.0.1:{free_port()}")


async def request_post(fake: FakeMattermost, n: int = 1) -> dict[str, Any]:
    def found() -> list[dict[str, Any]]:
        return [p for p in fake.bot_posts() if p["props"].get("attachments")]

    return (await eventually(lambda: len(found()) >= n and found(), what="the approval request"))[n - 1]


@pytest.fixture
def script(fake_llm: FakeOpenAI) -> FakeOpenAI:
    RESTARTS.clear()
    fake_llm.calls(call("restart_service", {"service": "nginx"}, "call_restart")).reply("Done.")
    return fake_llm


async def test_an_approvers_click_with_the_right_secret_runs_the_call(
        db_url: str, script: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    fake = fake_mattermost
    async with mattermost(settings(db_url, script, agents_dir, fake), http=True) as (app, _):
        fast(app)
        asked = fake.mention("restart nginx please", user=ALICE)
        post = await request_post(fake)
        assert (post["channel_id"], post["root_id"]) == (TOWN, asked)  # in the mention's thread
        assert "restart_service" in post["message"] and '{"service": "nginx"}' in post["message"]
        names = [a["name"] for a in post["props"]["attachments"][0]["actions"]]
        assert names == ["Approve", "Deny"]

        clicked = await fake.click(post["id"], "approve", BOB)
        await eventually(lambda: "Done." in fake.messages(TOWN, root=asked), what="the answer")
        rows = await approval_rows(app)
        tools = await tool_rows(app)
    assert clicked.status == 200 and "ephemeral_text" not in clicked.answer
    assert f"Approved by `{BOB}`" in fake.posts[post["id"]]["message"]  # the post updated in place
    assert fake.posts[post["id"]]["props"]["attachments"] == []  # no buttons any more
    assert RESTARTS["nginx"] == 1
    assert tool_messages(script.requests[1])[0]["content"] == "nginx restarted (run 1)"
    [row] = rows
    assert (row.status, row.decided_by, row.outcome, row.requested_by, row.message_ref) == (
        "approved", BOB, "ran", ALICE, post["id"])
    assert [(t.status, t.reason) for t in tools] == [("ok", f"approved by {BOB}")]


async def test_a_forged_secret_is_refused_and_a_non_approver_decides_nothing(
        sqlite_url: str, script: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    fake = fake_mattermost
    async with mattermost(settings(sqlite_url, script, agents_dir, fake), http=True) as (app, _):
        fast(app)
        asked = fake.mention("restart nginx please", user=ALICE)
        post = await request_post(fake)
        forged = await fake.click(post["id"], "approve", BOB, secret="0" * 64)  # the approver, a wrong secret
        assert forged.status == 403 and "not one yokebot posted" in forged.answer["ephemeral_text"]
        assert [r.status for r in await approval_rows(app)] == ["pending"]

        carol = await fake.click(post["id"], "approve", CAROL)  # a right secret, not an approver
        alice = await fake.click(post["id"], "approve", ALICE)  # the requester may not approve her own call
        for answer in (carol, alice):
            assert answer.status == 200 and answer.answer["ephemeral_text"].startswith("You may not approve")
            assert "update" not in answer.answer
        assert [r.status for r in await approval_rows(app)] == ["pending"] and RESTARTS["nginx"] == 0
        assert fake.posts[post["id"]]["props"]["attachments"]  # the buttons are still there

        denied = await fake.click(post["id"], "deny", BOB)
        await eventually(lambda: fake.messages(TOWN, root=asked)[-1:] == ["Done."], what="the answer")
        rows = await approval_rows(app)
    assert denied.status == 200 and f"Denied by `{BOB}`" in fake.posts[post["id"]]["message"]
    assert RESTARTS["nginx"] == 0 and [(r.status, r.decided_by) for r in rows] == [("denied", BOB)]
    assert "denied the request" in tool_messages(script.requests[1])[-1]["content"]


async def test_a_request_whose_arguments_read_as_a_broadcast_pings_nobody(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_mattermost: FakeMattermost):
    RESTARTS.clear()
    fake_llm.calls(call("restart_service", {"service": "@all @channel nginx"}, "call_ping")).reply("Not done.")
    fake = fake_mattermost
    async with mattermost(settings(sqlite_url, fake_llm, agents_dir, fake), http=True) as (app, _):
        fast(app)
        fake.mention("restart nginx please", user=ALICE)
        post = await request_post(fake)
        assert "@all" not in post["message"] and "all" in post["message"]
        assert "@channel" not in post["message"] and "channel nginx" in post["message"]
        await fake.click(post["id"], "deny", BOB)
        await eventually(lambda: "Denied" in fake.posts[post["id"]]["message"], what="the update")
    assert "@all" not in fake.posts[post["id"]]["message"] and "@channel" not in fake.posts[post["id"]]["message"]
