"""Side effects are bounded: one model reply with 25 `notify` calls posts at most `max_per_reply` alerts,
a turn at most `max_per_turn`, a channel at most `max_per_channel_per_minute`; every refused call is a
`denied` row with the reason, and the model reads "notify limit reached: ..." so it can merge its alerts."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bot.app import build_app
from bot.engine.messages import ToolCall
from bot.engine.service import TurnRequest
from bot.tools import builtin_tools
from bot.tools.notify import LocalLedger, make_notify_tool
from tests.conftest import make_settings, rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import registry, write_agent
from tests.tools.conftest import RecordingChat, Sandbox

NOTIFY_AGENT = """
description: alerts
tools:
  notify: {max_per_reply: 2, max_per_turn: 3}
notify:
  default: "slack:#ops-alerts"
  dedup_window_seconds: 600
"""


async def test_one_reply_with_25_notify_calls_posts_two(sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path):
    write_agent(agents_dir, "alerts", NOTIFY_AGENT)
    app = await build_app(make_settings(sqlite_url, fake_llm, agents_dir), registry={**registry(),
                          "notify": builtin_tools()["notify"]})
    chat = RecordingChat()
    app.notifier.register(chat)  # type: ignore[arg-type]
    try:
        fake_llm.calls(*[call("notify", {"message": f"disk {i}% on web-{i}"}) for i in range(25)])
        fake_llm.calls(call("notify", {"message": "one more, next reply"}),
                       call("notify", {"message": "and another"}))
        fake_llm.reply("done")
        result = await app.service.handle(TurnRequest("slack", "C1", "t1", "check disks", "alerts"))
        statuses = await rows(app, "SELECT status, reason FROM tool_invocations ORDER BY id")
    finally:
        await app.close()
    assert result.answer == "done"
    assert [text for _, text in chat.posts] == ["disk 0% on web-0", "disk 1% on web-1", "one more, next reply"]
    assert [s.status for s in statuses].count("ok") == 3 and [s.status for s in statuses].count("denied") == 24
    reasons = {s.reason for s in statuses if s.status == "denied"}
    assert any("alerts were already posted from this reply (max_per_reply 2)" in r for r in reasons)
    assert any("alerts were already posted in this turn (max_per_turn 3)" in r for r in reasons)
    observation = fake_llm.requests[1]["messages"][-1]["content"]
    assert observation.startswith("Denied by the sandbox: notify limit reached:")
    assert "put everything into one alert" in observation


async def test_a_channel_gets_at_most_n_alerts_a_minute(sandbox: Sandbox):
    clock = [1000.0]
    tool = make_notify_tool(LocalLedger(clock=lambda: clock[0]))
    sandbox.registry = {**sandbox.registry, "notify": tool}
    ex = sandbox.executor()
    run = sandbox.run_context()

    async def send(turn: str, text: str) -> str:
        run_t = replace(run, turn_id=turn)
        result = await ex.execute(ToolCall(f"c-{turn}-{text}", "notify", f'{{"message": "{text}"}}'), run_t, 1)
        await sandbox.audit.tool_finished(run_t, result)
        return result.status

    outcomes = [await send(f"turn{i}", f"alert {i}") for i in range(8)]  # 8 turns, one alert each
    assert outcomes == ["ok"] * 6 + ["denied"] * 2
    assert "max_per_channel_per_minute 6" in (sandbox.audit.tool_results[-1].reason or "")
    clock[0] += 61
    assert await send("turn9", "a minute later") == "ok"
    assert len(sandbox.chat.posts) == 7
