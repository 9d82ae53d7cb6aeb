"""The gate in the executor, through AgentService and the real database: an approved call runs once (no
retries), and a call nobody can be asked about is refused with the reason."""

from __future__ import annotations

from pathlib import Path

from bot.app import App
from bot.approvals.desk import ApproverKind
from bot.approvals.records import Approval
from bot.engine.service import TurnRequest
from bot.engine.spec.approval import PlatformId
from tests.approvals.harness import approval_rows
from tests.conftest import rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import FLAKY_CALLS, tool_messages, write_agent

AGENT = """
tools:
  flaky: {approval: {approvers: [U_BOSS]}}
  echo: {}
"""


class Yes:
    async def decide(self, approval: Approval) -> tuple[str, str]:
        return "approved", "U_BOSS"


def req(text: str) -> TurnRequest:
    return TurnRequest(platform="test", channel="c1", thread="t1", text=text, agent="tester", user="U_ALICE")


async def test_an_approved_call_runs_once_without_retries(bot: App, fake_llm: FakeOpenAI, agents_dir: Path):
    write_agent(agents_dir, "tester", AGENT)
    FLAKY_CALLS.clear()
    assert bot.approvals is not None
    bot.approvals.register_inline("test", Yes())  # type: ignore[arg-type]
    from bot.app import load_profiles

    bot.profiles.update(load_profiles(bot.settings, bot.registry))
    fake_llm.calls(call("flaky", {"key": "k"}, "call_flaky")).reply("It failed.")
    await bot.service.handle(req("try it"))
    assert FLAKY_CALLS["k"] == 1  # a transient failure is not retried: the human approved one run
    assert "gave up after 1 attempts" in tool_messages(fake_llm.requests[1])[0]["content"]
    (row,) = await approval_rows(bot)
    assert (row.status, row.decided_by, row.outcome) == ("approved", "U_BOSS", "error")
    (tool,) = await rows(bot, "SELECT status, reason, attempts FROM tool_invocations")
    assert (tool.status, tool.reason, tool.attempts) == ("error", "approved by U_BOSS", 1)


async def test_where_nobody_can_be_asked_the_call_is_refused_with_the_reason(
    bot: App, fake_llm: FakeOpenAI, agents_dir: Path
):
    write_agent(agents_dir, "tester", AGENT)
    from bot.app import load_profiles

    bot.profiles.update(load_profiles(bot.settings, bot.registry))
    FLAKY_CALLS.clear()
    fake_llm.calls(call("flaky", {"key": "k"}, "call_flaky")).reply("Could not.")
    await bot.service.handle(req("try it"))
    assert FLAKY_CALLS["k"] == 0
    seen = tool_messages(fake_llm.requests[1])[0]["content"]
    assert seen == "Not run: flaky needs a human's approval, but nobody can be asked from test"
    (tool,) = await rows(bot, "SELECT status, reason FROM tool_invocations")
    assert (tool.status, tool.reason) == ("denied", "flaky needs a human's approval, but nobody can be asked from test")
    assert await approval_rows(bot) == []


class Recorded:
    """Buttons that only remember what they were asked to show (the platforms have their own tests)."""

    def __init__(self) -> None:
        self.said: list[str] = []
        self.shown: list[str] = []

    async def ask(self, approval: Approval) -> str:
        return "ref"

    async def show(self, approval: Approval) -> None:
        self.shown.append(approval.status)

    async def say(self, approval: Approval, text: str) -> None:
        self.said.append(text)

    def kind(self, approver: str) -> ApproverKind:
        return "either"


async def test_a_click_after_a_crash_finds_no_live_heartbeat_and_records_not_run(bot: App):
    """A process killed outright never clears its heartbeat; an old one means the same as none."""
    from datetime import timedelta

    from bot.approvals.store import ApprovalStore, NewApproval
    from bot.store.models import utcnow

    assert bot.approvals is not None
    buttons = Recorded()
    bot.approvals.register("slack", buttons)
    session = await bot.store.session_for("slack", "C1", "1.0", "tester")
    store = ApprovalStore(bot.engine)
    long_ago = utcnow() - timedelta(minutes=5)
    approval_id = await store.create(NewApproval(
        session.id, "turn1", "tester", "call1", "restart_service", '{"service": "nginx"}', "U_ALICE",
        [PlatformId("U_BOSS")], False, "slack", "C1", "1.0", utcnow() + timedelta(minutes=5)), now=long_ago)
    await store.set_message(approval_id, "C1:2.0")
    answer = await bot.approvals.click("slack", approval_id, "U_BOSS", frozenset(), True, "C1:2.0")
    assert answer.approval is not None and answer.approval.status == "approved"
    row = await store.get(approval_id)
    assert row is not None and (row.status, row.decided_by, row.outcome) == ("approved", "U_BOSS", "not_run")
    assert len(buttons.said) == 1 and "no longer running" in buttons.said[0]
    # the same click on the other platform's buttons is not accepted
    other = await bot.approvals.click("discord", approval_id, "U_BOSS", frozenset(), False, "C1/2")
    assert other.private == "This approval request is unknown here."


async def test_a_request_left_by_a_cut_turn_is_adopted_once_and_one_never_recorded_expires(bot: App):
    """`adopt` (a kill -9 between posting a request and parking on it): the same call asked again in the same
    thread takes over the request whose message is known; one cut while it was being posted (no
    message recorded) cannot be matched to a message, so it expires as not run. Another call, another
    thread, another requester, or a request somebody waits for in-process is never taken."""
    from datetime import timedelta

    from bot.approvals.store import ApprovalStore, NewApproval
    from bot.store.models import utcnow

    store = ApprovalStore(bot.engine)
    session = await bot.store.session_for("slack", "C1", "1.0", "tester")
    other = await bot.store.session_for("slack", "C1", "9.0", "tester")
    args = '{"service": "nginx"}'

    def asked(session_id: str, turn: str, arguments: str = args, by: str = "U_ALICE",
              call_id: str = "call1") -> NewApproval:
        return NewApproval(session_id, turn, "tester", call_id, "restart_service", arguments, by,
                           [PlatformId("U_BOSS")], False, "slack", "C1", "1.0", utcnow() + timedelta(minutes=5))

    async def left(session_id: str, turn: str, arguments: str = args, *, by: str = "U_ALICE", posted: bool = True,
                   waited: bool = False) -> int:
        approval_id = await store.create(asked(session_id, turn, arguments, by))
        if not waited:
            await store.heartbeat(approval_id, None)  # a parking turn's request: nobody waits in-process
        if posted:
            await store.set_message(approval_id, f"C1:{approval_id}.0")
        return approval_id

    unposted = await left(session.id, "cut-0", posted=False)
    posted = await left(session.id, "cut-1")
    elsewhere = await left(other.id, "cut-2")
    another_call = await left(session.id, "cut-3", '{"service": "redis"}')
    waited_for = await left(session.id, "live-4", waited=True)
    someone_else = await left(session.id, "cut-5", by="U_MALLORY")  # approvers may be `requester`: theirs

    adopted = await store.adopt(asked(session.id, "rerun", call_id="call9"))
    assert adopted is not None and (adopted.id, adopted.turn_id, adopted.call_id) == (posted, "rerun", "call9")
    gone = await store.get(unposted)
    assert gone is not None and (gone.status, gone.outcome) == ("expired", "not_run")
    for untouched in (elsewhere, another_call, waited_for, someone_else):
        row = await store.get(untouched)
        assert row is not None and row.status == "pending" and row.turn_id.startswith(("cut", "live"))
