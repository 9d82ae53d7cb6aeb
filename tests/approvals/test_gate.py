"""The gate in the executor, through AgentService and the real database: an approved call runs once (no
retries), and a call nobody can be asked about is refused with the reason."""

from __future__ import annotations

from pathlib import Path

from bot.app import App
from bot.engine.service import TurnRequest
from bot.store.approvals import Approval
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
