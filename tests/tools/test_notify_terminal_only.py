"""Issue 37.1: an alert `yokebot chat` only showed in its terminal (the target's platform is not configured
there) was recorded in the shared notify ledger as posted, so for the next `dedup_window_seconds` the same alert
from `yokebot run` on the same database was "not posted again" and nobody was told. Now the shared ledger holds
only alerts that go to a platform: the real `yokebot chat` process first, then an app with Slack posting the same
alert, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from bot.app import build_app
from bot.engine.service import TurnRequest
from tests.conftest import make_settings, rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import registry, tool_messages
from tests.test_cli import base_env, yokebot
from tests.test_cli_console import ops_with_notify
from tests.tools.conftest import RecordingChat

ALERT = "nginx: 502s since 08:00 on web1"


async def test_an_alert_shown_only_in_chat_does_not_silence_the_same_alert_from_run(
        db_url: str, tmp_path: Path, fake_llm: FakeOpenAI):
    ops_with_notify(tmp_path)  # notify.default slack:#ops-alerts, the shipped agent's dedup window (600 s)
    env = base_env(tmp_path, fake_llm) | {"YOKEBOT_DATABASE_URL": db_url}
    fake_llm.calls(call("notify", {"message": ALERT}))
    fake_llm.reply("Shown.")
    out = yokebot("chat", env=env, stdin="alert the team\n")
    assert out.returncode == 0, out.stderr
    assert ALERT in out.stdout and "slack is not configured" in out.stdout
    told = tool_messages(fake_llm.requests[-1])[0]["content"]
    assert told.startswith("Not posted to slack:#ops-alerts: shown in this terminal only; nobody was notified")

    app = await build_app(make_settings(db_url, fake_llm, tmp_path / "agents"), registry=registry())
    slack = RecordingChat()
    app.notifier.register(slack)  # type: ignore[arg-type]
    try:
        fake_llm.calls(call("notify", {"message": ALERT}))
        fake_llm.reply("Alerted.")
        await app.service.handle(TurnRequest("slack", "C1", "t1", "the same, from Slack", "ops"))
        assert slack.posts == [("#ops-alerts", ALERT)]  # posted, not deduplicated against the terminal's
        told = tool_messages(fake_llm.requests[-1])[0]["content"]
        assert told.startswith("Posted to slack:#ops-alerts"), told
        ledger = await rows(app, "SELECT target, state FROM notify_ledger")
        assert [tuple(r) for r in ledger] == [("slack:#ops-alerts", "posted")]  # the terminal's alert is not there
    finally:
        await app.close()

