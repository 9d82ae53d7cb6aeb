"""Approvals in Teams: an Adaptive Card with Approve / Deny (Action.Submit) in the turn's reply chain; the click
comes back as a validated message activity and counts only from an approver (by AAD object id) on that very
card. Real adapter, real JWTs, the fake Teams (tests/fakes/teams.py)."""

from __future__ import annotations

from pathlib import Path

from bot.app import build_app
from bot.approvals.desk import ACTION_APPROVE, ACTION_DENY, NOT_THIS_MESSAGE, NOT_YOURS
from tests.approvals.harness import approval_rows, fast
from tests.chat.teams_harness import teams_bot
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, call
from tests.fakes.teams import ALICE, BOB, OPS, FakeTeams, Sent
from tests.helpers import RESTARTS, eventually, registry, write_agent

AGENT = f"""
tools:
  restart_service:
    approval: {{approvers: ["{BOB}"], timeout: 30s}}
max_iterations: 4
"""


async def card(fake: FakeTeams, chain: str) -> tuple[Sent, int]:
    found = await eventually(lambda: fake.cards_in(chain), what="the approval card")
    content = found[0].activity["attachments"][0]["content"]
    return found[0], int(content["actions"][0]["data"]["approval"])


async def test_only_an_approver_s_click_on_the_card_decides(sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path,
                                                            fake_teams: FakeTeams):
    RESTARTS.clear()
    write_agent(agents_dir, "tester", AGENT)
    fake_llm.calls(call("restart_service", {"service": "nginx"}, "call_restart")).reply("Done.")
    app = await build_app(make_settings(sqlite_url, fake_llm, agents_dir, **fake_teams.settings()),
                          registry=registry())
    fast(app)
    try:
        async with teams_bot(app) as (_, endpoint):
            mention = fake_teams.activity("restart nginx please", user=ALICE)
            chain = f"{OPS};messageid={mention['id']}"
            assert await fake_teams.deliver(endpoint, mention) == 200
            posted, approval = await card(fake_teams, chain)
            content = posted.activity["attachments"][0]["content"]
            assert posted.activity["attachments"][0]["contentType"] == "application/vnd.microsoft.card.adaptive"
            assert [a["type"] for a in content["actions"]] == ["Action.Submit", "Action.Submit"]
            assert '"service": "nginx"' in str(content["body"]) and BOB in str(content["body"])

            def click(user: str, action: str, card_id: str) -> dict[str, object]:
                return fake_teams.activity("", user=user, root=mention["id"], mention=False, reply_to=card_id,
                                           value={"yokebot": action, "approval": approval})

            assert await fake_teams.deliver(endpoint, click(ALICE, ACTION_APPROVE, posted.id)) == 200  # the asker
            await eventually(lambda: NOT_YOURS in fake_teams.texts_in(chain), what="the refusal")
            assert await fake_teams.deliver(endpoint, click(BOB, ACTION_APPROVE, "1")) == 200  # not that card
            await eventually(lambda: NOT_THIS_MESSAGE in fake_teams.texts_in(chain), what="the wrong card")
            assert not RESTARTS and fake_teams.updates == []
            assert await fake_teams.deliver(endpoint, click(BOB, ACTION_APPROVE, posted.id)) == 200
            await eventually(lambda: "Done." in fake_teams.texts_in(chain), what="the answer after approval")
            assert await fake_teams.deliver(endpoint, click(BOB, ACTION_DENY, posted.id)) == 200  # too late
            await eventually(lambda: any("already approved" in t for t in fake_teams.texts_in(chain)),
                             what="the late click told")
        assert RESTARTS == {"nginx": 1}
        [shown] = [u for u in fake_teams.updates if u.id == posted.id]
        decided = shown.activity["attachments"][0]["content"]
        assert "actions" not in decided and f"Approved by {BOB}" in str(decided["body"])
        [row] = await approval_rows(app)
        assert (row.status, row.decided_by, row.outcome, row.platform, row.channel, row.thread) == \
            ("approved", BOB, "ran", "teams", OPS, mention["id"])
    finally:
        await app.close()
