"""`yokebot chat` and `yokebot ask` as a new user meets them: log text shown as written, piped output
untouched, Ctrl-C stopping one turn, alerts with somewhere to go. Real subprocesses, the fake model."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, call
from tests.fakes.slack_server import FakeSlack
from tests.test_cli import ROOT, base_env, yokebot

LOG_LINES = "[/] [bold]not markup[/bold]\n08:00:01 [error] 1234#0: upstream timed out, [/api/v1] GET failed\n"


def ops_with_notify(tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "error.log").write_text(LOG_LINES)
    agent = tmp_path / "agents" / "ops"
    agent.mkdir(parents=True)
    (agent / "AGENT.md").write_text(
        "---\ntools:\n"
        f"  read_file: {{roots: ['{logs}']}}\n"
        f"  grep_log: {{roots: ['{logs}']}}\n"
        "  notify: {}\n"
        'notify: {default: "slack:#ops-alerts"}\n'
        "---\nYou are ops.\n")
    return logs


def test_log_text_that_looks_like_markup_is_shown_as_written(tmp_path: Path, fake_llm: FakeOpenAI):
    logs = ops_with_notify(tmp_path)
    # the pattern first: the preview is cut to the width, and a worker's tmp path is long
    fake_llm.calls(call("grep_log", {"pattern": "[/api/v1]", "path": str(logs / "error.log")}))
    fake_llm.calls(call("read_file", {"path": str(logs / "error.log")}))
    fake_llm.reply("Saw [error] and [/api/v1] GET failed.")
    out = yokebot("chat", env=base_env(tmp_path, fake_llm), stdin="check the log\n")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "MarkupError" not in out.stderr
    assert "[error]" in out.stdout  # nginx's own level survives in the previews
    assert '"pattern": "[/api/v1]"' in out.stdout
    assert "[/] [bold]not markup[/bold]" in out.stdout
    assert "Saw [error] and [/api/v1] GET failed." in out.stdout


def test_piped_ask_prints_exactly_what_the_model_wrote(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_with_notify(tmp_path)
    answer = "status :smile:\n" + "x" * 300 + "\n  indented   with   spaces\n[b]not bold[/b]"
    fake_llm.reply(answer)
    out = yokebot("ask", "hi", env=base_env(tmp_path, fake_llm))
    assert out.returncode == 0, out.stderr
    assert out.stdout == answer + "\n"


def test_answers_keep_their_lines_and_link_urls(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_with_notify(tmp_path)
    fake_llm.reply("502s at:\n08:00:01\n08:00:02\nSee [the runbook](https://wiki.example.com/nginx).")
    out = yokebot("chat", env=base_env(tmp_path, fake_llm), stdin="when?\n")
    assert out.returncode == 0, out.stderr
    assert "502s at:\n08:00:01\n08:00:02\n" in out.stdout
    assert "https://wiki.example.com/nginx" in out.stdout


def test_notify_in_chat_without_slack_shows_the_alert_in_the_terminal(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_with_notify(tmp_path)
    fake_llm.calls(call("notify", {"message": "nginx: 502s since 08:00 [error]"}))
    fake_llm.reply("Alerted.")
    env = base_env(tmp_path, fake_llm)
    out = yokebot("chat", env=env, stdin="alert the team\n")
    assert out.returncode == 0, out.stderr
    assert "alert for slack:#ops-alerts" in out.stdout
    assert "nginx: 502s since 08:00 [error]" in out.stdout
    assert "slack is not configured, so it is shown here only; nobody was notified" in out.stdout
    assert "← not_posted" in out.stdout  # neither ok nor an error
    tool_result = next(m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert "shown in this terminal only; nobody was notified (slack is not configured; to post there, set " \
           "SLACK_BOT_TOKEN" in tool_result
    assert "Posted" not in tool_result
    listed = yokebot("sessions", "--json", env=env)
    session = json.loads(listed.stdout)[0]["id"]
    traced = json.loads(yokebot("trace", session, "--json", env=env).stdout)
    [notify] = [c for t in traced["turns"] for s in t["steps"] for c in s["tools"] if c["tool"] == "notify"]
    assert notify["status"] == "not_posted"  # the audit row says nobody was told


def test_chat_ask_and_schedule_run_post_notify_to_slack_when_its_token_is_set(tmp_path: Path, fake_llm: FakeOpenAI,
                                                                              fake_slack: FakeSlack):
    """One rule for every terminal command: the target's platform configured (its token set) -> posted through
    a post-only adapter (no Socket Mode), as `yokebot run` would."""
    ops_with_notify(tmp_path)
    env = base_env(tmp_path, fake_llm) | {"SLACK_BOT_TOKEN": "xoxb-terminal-post-42", "SLACK_API_URL": fake_slack.api_url}
    fake_llm.calls(call("notify", {"message": "nginx: 502s since 08:00 (chat)"}))
    fake_llm.reply("Alerted.")
    out = yokebot("chat", env=env, stdin="alert the team\n")
    assert out.returncode == 0, out.stderr
    assert "← ok" in out.stdout and "shown here only" not in out.stdout
    fake_llm.calls(call("notify", {"message": "nginx: 502s since 08:00 (ask)"}))
    fake_llm.reply("Alerted.")
    asked = yokebot("ask", "--json", "alert the team", env=env)
    assert asked.returncode == 0, asked.stderr
    [notify] = json.loads(asked.stdout)["tool_calls"]
    assert notify["status"] == "ok" and notify["result"].startswith("Posted to slack:#ops-alerts")
    assert [p["text"] for p in fake_slack.posts("C_OPS_ALERTS")] == [
        "nginx: 502s since 08:00 (chat)", "nginx: 502s since 08:00 (ask)"]
    assert fake_slack.calls_to("apps.connections.open") == []  # post-only: no Socket Mode


def test_ask_without_the_platform_shows_the_alert_on_stderr_and_audits_not_posted(tmp_path: Path,
                                                                                  fake_llm: FakeOpenAI):
    ops_with_notify(tmp_path)
    fake_llm.calls(call("notify", {"message": "nginx: 502s since 08:00"}))
    fake_llm.reply("I could not reach anyone.")
    asked = yokebot("ask", "--json", "alert the team", env=base_env(tmp_path, fake_llm))
    assert asked.returncode == 0, asked.stderr  # not a tool error any more
    [notify] = json.loads(asked.stdout)["tool_calls"]
    assert notify["status"] == "not_posted" and "nobody was notified" in notify["result"]
    assert "alert for slack:#ops-alerts" in asked.stderr and "nginx: 502s since 08:00" in asked.stderr


def test_chat_log_lines_go_to_the_log_file_not_between_answers(tmp_path: Path, fake_llm: FakeOpenAI, capsys):
    import logging

    from bot.commands.support import chat_log
    from tests.conftest import make_settings

    settings = make_settings("sqlite+aiosqlite:///x.db", fake_llm, tmp_path, chat_log_file=tmp_path / "s" / "chat.log")
    stream = chat_log(settings)
    try:
        logging.getLogger("bot.engine.run.executor").warning("tool %s raised; retrying (session=abc123)", "grep_log")
    finally:
        root = logging.getLogger()
        for handler in [h for h in root.handlers if getattr(h, "_yokebot_handler", False)]:
            root.removeHandler(handler)
        stream.close()
    captured = capsys.readouterr()
    assert "retrying" not in captured.out + captured.err
    assert "tool grep_log raised; retrying (session=abc123)" in (tmp_path / "s" / "chat.log").read_text()


def test_a_failed_model_call_retried_in_chat_leaves_the_screen_clean(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_with_notify(tmp_path)
    fake_llm.fail(500).reply("Recovered.")
    out = yokebot("chat", env=base_env(tmp_path, fake_llm), stdin="hi\n")
    assert out.returncode == 0, out.stderr
    assert "Recovered." in out.stdout
    assert out.stderr == ""


def _reader(proc: subprocess.Popen[str], sink: list[str]) -> threading.Thread:
    def pump() -> None:
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, ""):
            sink.append(line)

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    return t


def _wait(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _chat(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "bot", "chat"], cwd=ROOT, env={**env, "PYTHONUNBUFFERED": "1"},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_ctrl_c_stops_the_turn_not_the_chat(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_with_notify(tmp_path)
    fake_llm.hang(30)
    fake_llm.reply("Second answer.")
    env = base_env(tmp_path, fake_llm)
    proc = _chat(env)
    lines: list[str] = []
    _reader(proc, lines)
    try:
        assert proc.stdin is not None
        proc.stdin.write("a long question\n")
        proc.stdin.flush()
        _wait(lambda: len(fake_llm.requests) == 1)
        proc.send_signal(signal.SIGINT)
        _wait(lambda: "stopped" in "".join(lines))
        proc.stdin.write("second question\n")
        proc.stdin.flush()
        _wait(lambda: "Second answer." in "".join(lines))
        assert proc.poll() is None  # still chatting
        proc.stdin.close()
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    sessions = json.loads(yokebot("sessions", "--json", env=env).stdout)
    traced = json.loads(yokebot("trace", sessions[0]["id"], "--json", env=env).stdout)
    statuses = [t["status"] for t in traced["turns"]]
    assert statuses == ["stopped", "ok"], statuses
    assert traced["turns"][0]["stopped_by"] == "user"


def test_ctrl_c_at_the_prompt_leaves_at_once(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_with_notify(tmp_path)
    proc = _chat(base_env(tmp_path, fake_llm))
    lines: list[str] = []
    _reader(proc, lines)
    try:
        _wait(lambda: "talking to agent" in "".join(lines))
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) in (0, 130)  # without Enter, without closing stdin
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()


def test_chat_log_file_default_is_outside_the_working_directory(tmp_path: Path):
    from bot.config import Settings

    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        settings = Settings(_env_file=None)  # type: ignore[call-arg]
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert settings.chat_log_file == tmp_path / "state" / "yokebot" / "chat.log"


def test_chat_streams_the_answer_as_it_is_written(tmp_path: Path, fake_llm: FakeOpenAI):
    """With a streaming model the answer's first words are on screen seconds before its last ones, once."""
    ops_with_notify(tmp_path)
    answer = "The upstream 10.0.0.7 timed out at 08:00:01; nothing else since."  # 9 chunks of 8 characters
    fake_llm.reply(answer, chunk_delay=0.3)
    proc = _chat({**base_env(tmp_path, fake_llm), "YOKEBOT_MODEL_STREAM": "true"})
    seen: list[tuple[float, str]] = []

    def pump() -> None:
        assert proc.stdout is not None
        while ch := proc.stdout.read(1):
            seen.append((time.monotonic(), ch))

    threading.Thread(target=pump, daemon=True).start()

    def at(fragment: str) -> float | None:
        text, when = "", None
        for t, ch in list(seen):
            text += ch
            if fragment in text:
                when = t
                break
        return when

    try:
        assert proc.stdin is not None
        proc.stdin.write("what happened?\n")
        proc.stdin.flush()
        _wait(lambda: at(answer) is not None)
        proc.stdin.close()
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    first, whole = at(answer[:8]), at(answer)
    assert first is not None and whole is not None and whole - first > 1.5  # written as it came
    assert "".join(ch for _, ch in seen).count(answer) == 1  # not printed again at the end


def test_an_answer_or_a_trace_carrying_escape_sequences_cannot_drive_the_terminal():
    # a model's answer can quote a log line an attacker wrote: OSC 52 writes the clipboard, ESC[2J clears the
    # screen, CSI \x9b is ESC[ on many terminals; Rich would print them as they are
    from datetime import UTC, datetime

    from rich.console import Console

    from bot.chat.console import view as console_view
    from bot.observability.queries import TurnTrace
    from bot.observability.render import turn_tree

    hostile = "disk ok\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07\x1b[2J\x9b31m done"
    console = Console(force_terminal=True, width=200)
    with console.capture() as shown:
        console_view.print_text(console, console_view.answer(hostile))
        turn = TurnTrace(1, "t", "cli", "u", hostile, hostile, "error", hostile, 1, False, datetime.now(UTC), None)
        console.print(turn_tree(turn))
    out = shown.get()
    assert "disk ok" in out and "done" in out
    assert "\x07" not in out and "\x9b" not in out and "\x1b[2J" not in out and "\x1b]" not in out


def test_piped_tables_keep_each_row_on_one_line(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_with_notify(tmp_path)
    fake_llm.reply("fine")
    env = base_env(tmp_path, fake_llm)
    asked = yokebot("ask", "--json", "a question that starts a session", env=env)
    session = json.loads(asked.stdout)["session_id"]
    env.pop("COLUMNS", None)  # as a user's pipe: no width given, not a terminal
    listed = yokebot("sessions", env=env)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if session in line)  # the whole id, on one line
    assert "cli" in row and re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", row)  # ... with its platform and its date


def test_chat_says_where_its_agent_came_from_and_when_it_starts_a_new_database(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_with_notify(tmp_path)
    fake_llm.reply("hello").reply("again").reply("elsewhere")
    env = base_env(tmp_path, fake_llm)
    first = yokebot("chat", env=env, stdin="hi\n")
    assert first.returncode == 0, first.stderr
    text = " ".join(first.stdout.split())
    assert f"agent ops from {(tmp_path / 'agents' / 'ops' / 'AGENT.md').resolve()}" in text
    assert f"no database at {(tmp_path / 'cli.db').resolve()} yet: a new one starts there" in text
    again = yokebot("chat", env=env, stdin="hi\n")
    assert "no database at" not in again.stdout  # the same folder: the conversation continues
    elsewhere = env | {"YOKEBOT_DATABASE_URL": "sqlite+aiosqlite:///./yokebot.db"}
    (tmp_path / "other").mkdir()
    asked = yokebot("ask", "hi", env=elsewhere, cwd=tmp_path / "other")  # started in another folder
    assert asked.returncode == 0, asked.stderr
    said = "".join(asked.stderr.split())  # a path may wrap
    assert "nodatabaseat" in said and str((tmp_path / "other" / "yokebot.db").resolve()) in said
