"""The ops scenario end to end: AgentService -> ReActLoop -> real openai SDK -> scripted model server; the
tools read real files, notify goes through AdapterNotifier to a recording chat adapter; audited in SQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import App, build_app
from bot.engine.service import TurnRequest
from bot.tools import builtin_tools
from tests.conftest import make_settings, rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import copy_shipped_ops, tool_messages
from tests.tools.conftest import RecordingChat

REPO = Path(__file__).resolve().parents[2]
ERRORS = (
    "2024/05/01 09:58:00 [notice] 1#1: signal process started\n"
    "2024/05/01 10:00:01 [error] 7#7: *101 upstream prematurely closed connection while reading response "
    'header from upstream, client: 10.0.0.5, upstream: "http://10.0.1.20:8000/api", HTTP/1.1 502\n'
    "2024/05/01 10:00:07 [error] 7#7: *102 connect() failed (111: Connection refused) while connecting to "
    'upstream, upstream: "http://10.0.1.20:8000/api", HTTP/1.1 502\n'
)


@pytest.fixture
async def ops(
    tmp_path: Path, sqlite_url: str, fake_llm: FakeOpenAI
) -> AsyncIterator[tuple[App, RecordingChat, Path]]:
    """The shipped ops agent (its AGENT.md, runbook and skill), with its log root moved into tmp_path."""
    logs = tmp_path / "nginx"
    logs.mkdir()
    (logs / "error.log").write_text(ERRORS)
    agents = tmp_path / "agents"
    md = copy_shipped_ops(agents)
    md.write_text(md.read_text().replace("/var/log/nginx", str(logs)))
    app = await build_app(
        make_settings(
            sqlite_url,
            fake_llm,
            agents,
            default_agent="ops",
            slack_bot_token="xoxb-999999999999-configuredtoken",
        ),
        registry=builtin_tools(),
    )
    chat = RecordingChat("slack")
    app.notifier.register(chat)  # type: ignore[arg-type]
    yield app, chat, logs
    await app.close()


def ask(text: str, thread: str = "t1") -> TurnRequest:
    return TurnRequest(platform="slack", channel="C-team", thread=thread, text=text, agent="ops", user="U1")


async def test_check_nginx_then_alert_the_team_then_answer(ops, fake_llm: FakeOpenAI):
    app, chat, logs = ops
    fake_llm.calls(call("tail_log", {"path": f"{logs}/error.log", "lines": 200, "contains": "502"}, "c_tail"))
    fake_llm.calls(
        call("notify", {"message": "nginx: 2x 502 since 10:00 (upstream 10.0.1.20:8000)"}, "c_notify")
    )
    fake_llm.reply("Degraded: 2 upstream 502s since 10:00:01; I alerted #ops-alerts.")

    result = await app.service.handle(
        ask("Check the recent nginx error logs; if something's wrong, push it to the team channel.")
    )

    assert result.answer == "Degraded: 2 upstream 502s since 10:00:01; I alerted #ops-alerts."
    assert chat.posts == [("#ops-alerts", "nginx: 2x 502 since 10:00 (upstream 10.0.1.20:8000)")]
    seen = tool_messages(fake_llm.requests[1])[0]["content"].splitlines()
    assert (
        seen[0] == f"==> {logs}/error.log <=="
        and len(seen) == 3
        and all("HTTP/1.1 502" in s for s in seen[1:])
    )
    tools = {t["function"]["name"] for t in fake_llm.requests[0]["tools"]}
    assert {"tail_log", "grep_log", "read_file", "shell", "notify", "remember", "forget"} <= tools
    llm = await rows(app, "SELECT id FROM llm_calls WHERE session_id = :s", s=result.session_id)
    audit = await rows(
        app,
        "SELECT tool, status, reason, result FROM tool_invocations WHERE session_id = :s ORDER BY id",
        s=result.session_id,
    )
    assert len(llm) == 3
    assert [(a.tool, a.status, a.reason) for a in audit] == [("tail_log", "ok", None), ("notify", "ok", None)]
    assert audit[1].result == "Posted to slack:#ops-alerts (ref slack-msg-1)."


async def test_a_denied_call_is_audited_and_the_model_adapts(ops, fake_llm: FakeOpenAI):
    app, chat, logs = ops
    fake_llm.calls(call("shell", {"command": f"cat /etc/passwd; tail {logs}/error.log"}, "c_bad"))
    fake_llm.calls(call("shell", {"command": f"grep -c 'HTTP/1.1 502' {logs}/error.log"}, "c_good"))
    fake_llm.reply("2 502s.")

    result = await app.service.handle(ask("how many 502s?"))

    assert result.answer == "2 502s."
    bad = tool_messages(fake_llm.requests[1])[0]["content"]
    assert bad.startswith("Denied by the sandbox: shell syntax is not available: ';' (command chaining)")
    assert "Allowed: tail [-n -q path...]; grep" in bad and str(logs) in bad
    good = tool_messages(fake_llm.requests[2])[-1]["content"]
    assert good.splitlines()[1:] == ["[exit code 0]", "2"]
    audit = await rows(app, "SELECT tool, status, reason FROM tool_invocations ORDER BY id")
    assert [(a.tool, a.status) for a in audit] == [("shell", "denied"), ("shell", "ok")]
    assert audit[0].reason.startswith("shell syntax is not available")
    assert chat.posts == []


async def test_configured_secrets_never_reach_the_model_or_the_audit_table(ops, fake_llm: FakeOpenAI):
    app, _, logs = ops
    (logs / "debug.log").write_text("token sent: xoxb-999999999999-configuredtoken\nauth ok\n")
    fake_llm.calls(call("tail_log", {"path": f"{logs}/debug.log"})).reply("ok")
    await app.service.handle(ask("debug log?"))
    seen = tool_messages(fake_llm.requests[1])[0]["content"]
    assert "configuredtoken" not in seen and "[REDACTED]" in seen
    (audit,) = await rows(app, "SELECT result FROM tool_invocations")
    assert "configuredtoken" not in audit.result


async def test_remembered_facts_show_up_in_later_prompts(ops, fake_llm: FakeOpenAI):
    app, _, _ = ops
    fake_llm.calls(call("remember", {"fact": "10.0.1.20 is the api upstream, owned by team Atlas"})).reply(
        "Noted."
    )
    await app.service.handle(ask("remember: 10.0.1.20 is the api upstream, owned by team Atlas", thread="a"))
    fake_llm.reply("Team Atlas.")
    await app.service.handle(ask("who owns the api upstream?", thread="b"))
    system = fake_llm.requests[-1]["messages"][0]["content"]
    assert "## Long-term memory" in system
    assert "- [1] 10.0.1.20 is the api upstream, owned by team Atlas (this channel)" in system


async def test_the_shipped_ops_profile_has_a_deny_by_default_policy():
    from bot.engine.spec.profiles import ProfileLoader

    profile = ProfileLoader(REPO / "agents", builtin_tools()).load("ops")
    notify = profile.tools["notify"]
    assert notify.default == "slack:#ops-alerts" and notify.dedup_window_seconds > 0  # type: ignore[attr-defined]
    for name in ("read_file", "tail_log", "grep_log", "shell"):
        assert profile.tools[name].roots == ("/var/log/nginx",)  # type: ignore[attr-defined]
    commands = [r.command for r in profile.tools["shell"].commands]  # type: ignore[attr-defined]
    assert {"tail", "grep", "journalctl -u nginx", "systemctl status nginx", "df -h", "uptime"} <= set(
        commands
    )
    reporter = ProfileLoader(REPO / "agents", builtin_tools()).load("reporter")
    assert "notify" not in reporter.tools and reporter.tools["tail_log"].roots == ("/var/log/nginx",)  # type: ignore[attr-defined]
