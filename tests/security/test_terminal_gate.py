"""The terminal's one gate (`Terminal`, bot/chat/console/view.py): text from outside (alert labels, channel
ids forged into an event, a user's message, a model's answer) reaches no terminal with a control, bidi or
zero-width character raw, whichever command prints it. The CLI as a user runs it: real subprocesses."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from bot.app import build_app
from bot.engine.service import TurnRequest
from bot.store.db import create_engine, ensure_schema
from tests.alerts.harness import PAYLOADS, ops_agent
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import write_agent
from tests.test_cli import base_env, yokebot

RLO, ZWSP = "\u202e", "\u200b"
# a terminal title (OSC 0), the clipboard (OSC 52), clear screen, 8-bit CSI, a bidi isolate, a zero-width joiner
HOSTILE = "C1\x1b]0;pwned\x07\x1b]52;c;Y3VybA==\x07\x1b[2J\x9b31m\u2066x\u200d\ufeffend"
# Rich's own codes when it believes it writes to a terminal: colours, the live view's cursor (hide, show, up,
# erase the line). Not "clear the screen" (2J) nor any OSC: those only come from the data.
SGR = re.compile(r"\x1b\[(?:[0-9;]*m|\?25[lh]|2K|[0-9]*A|[0-9]*G)")


def raw(text: str) -> list[str]:
    """What a terminal would act on or read otherwise than shown, with Rich's colour codes set aside."""
    text = SGR.sub("", text)
    return [c for c in text if (ord(c) < 32 and c not in "\n") or 0x7F <= ord(c) <= 0x9F
            or c in "\u061c\u200b\u200c\u200d\u200e\u200f\u2060\ufeff"
            or 0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069]


def test_alerts_test_shows_bidi_overrides_and_zero_width_characters_of_labels_visibly(tmp_path: Path):
    ops_agent(tmp_path / "agents")
    body = json.loads((PAYLOADS / "alertmanager_firing.json").read_text())
    alert = body["alerts"][0]
    alert["labels"]["service"] = f"api{RLO}exe.{ZWSP}txt"
    alert["labels"]["instance"] = f"api-1{ZWSP}:8080\x1b]0;owned\x07"
    alert["annotations"]["summary"] = f"5xx ratio {RLO}above{ZWSP} 5%"
    body["groupKey"] = f'{{}}:{{alertname="High{ZWSP}ErrorRate{RLO}"}}'
    (tmp_path / "hostile.json").write_text(json.dumps(body))
    for forced in ({}, {"FORCE_COLOR": "1"}):  # piped, and as if to a terminal (Rich then adds colours)
        done = yokebot("alerts", "test", str(tmp_path / "hostile.json"), env={**base_env(tmp_path, None), **forced})
        assert done.returncode == 0, done.stderr
        assert raw(done.stdout) == [], done.stdout
        shown = SGR.sub("", done.stdout)
        assert "Route: agent ops" in shown
        assert "api\ufffdexe.\ufffdtxt" in shown  # shown where they were, not silently dropped
        assert "High\ufffdErrorRate\ufffd" in shown


def hostile_session(db: Path) -> None:
    """A sessions row as a forged Slack event would leave it: written straight into the database."""
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO sessions (id, platform, channel, thread, agent, created_at, updated_at) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)",
                     ("s" * 32, "slack", HOSTILE, f"17.{RLO}1", "ops", "2026-12-01 10:00:00.000000",
                      "2026-12-01 10:00:00.000000"))


async def test_sessions_shows_an_escape_sequence_in_a_channel_id_visibly(tmp_path: Path):
    env = base_env(tmp_path, None)
    engine = create_engine(env["YOKEBOT_DATABASE_URL"])
    await ensure_schema(engine)
    await engine.dispose()
    hostile_session(tmp_path / "cli.db")
    for forced in ({}, {"FORCE_COLOR": "1"}):
        done = yokebot("sessions", env={**env, **forced})
        assert done.returncode == 0, done.stderr
        assert raw(done.stdout) == [], done.stdout
        shown = SGR.sub("", done.stdout)
        assert "pwned" in shown and "end" in shown and "\ufffd" in shown
    done = yokebot("sessions", "--json", env=env)  # for scripts: the same data, escaped
    assert raw(done.stdout) == [] and json.loads(done.stdout)[0]["channel"] == HOSTILE


@pytest.mark.parametrize("command", [("sessions",), ("trace", "{session}"), ("trace", "{session}", "--json"),
                                     ("usage", "--by", "channel"), ("usage", "--by", "channel", "--json")],
                         ids=" ".join)
async def test_trace_and_usage_show_a_forged_channel_user_text_and_answer_visibly(
        tmp_path: Path, fake_llm: FakeOpenAI, command: tuple[str, ...]):
    """A turn recorded through the real service from a forged event: every field from outside, then each
    command that prints them (one command a case, so the cases run side by side)."""
    env = base_env(tmp_path, fake_llm)
    agents = Path(env["YOKEBOT_AGENTS_DIR"])
    write_agent(agents, "ops", "tools: [current_time]")
    fake_llm.reply(f"the answer {HOSTILE}")
    app = await build_app(make_settings(env["YOKEBOT_DATABASE_URL"], fake_llm, agents))
    try:
        result = await app.service.handle(TurnRequest(platform="slack", channel=HOSTILE, thread=HOSTILE,
                                                      agent="ops", text=f"hi {HOSTILE}", user=f"U{RLO}1"))
    finally:
        await app.close()
    args = tuple(a.format(session=result.session_id) for a in command)
    for forced in ({}, {"FORCE_COLOR": "1"}):
        done = yokebot(*args, env={**env, **forced})
        assert done.returncode == 0, (args, done.stderr)
        assert raw(done.stdout) == [], (args, done.stdout)
        assert "pwned" in done.stdout or "usage" in args, (args, done.stdout)


def test_ask_prints_a_hostile_answer_visibly_piped_and_as_json(tmp_path: Path, fake_llm: FakeOpenAI):
    """The final answer: piped (a pipe often ends on a terminal: `yokebot ask ... | tail`), and --json."""
    write_agent(tmp_path / "agents", "ops", "tools: [current_time]")
    env = {**base_env(tmp_path, fake_llm), "YOKEBOT_DEFAULT_AGENT": "ops"}
    fake_llm.reply(f"line one\n{HOSTILE}\r\n")
    done = yokebot("ask", "hi", env=env)
    assert done.returncode == 0, done.stderr
    assert raw(done.stdout) == [] and done.stdout.startswith("line one\nC1\ufffd]0;pwned\ufffd"), done.stdout
    fake_llm.reply(HOSTILE)
    done = yokebot("ask", "--json", "hi", env=env)
    assert done.returncode == 0, done.stderr
    assert raw(done.stdout) == [] and json.loads(done.stdout)["answer"] == HOSTILE  # escaped, not lost


def test_chat_shows_hostile_tool_arguments_results_and_answer_visibly(tmp_path: Path, fake_llm: FakeOpenAI):
    """`yokebot chat`: the tool-call line (the model's arguments), its result's preview, the streamed answer."""
    write_agent(tmp_path / "agents", "ops", "tools: [current_time]")
    env = {**base_env(tmp_path, fake_llm), "YOKEBOT_DEFAULT_AGENT": "ops", "FORCE_COLOR": "1"}
    fake_llm.calls(call("current_time", {"timezone": HOSTILE}))
    fake_llm.reply(f"done {HOSTILE}")
    done = yokebot("chat", env=env, stdin="hi\n/quit\n")
    assert done.returncode == 0, done.stderr
    shown = SGR.sub("", done.stdout)
    assert "current_time" in shown and "done C1\ufffd]0;pwned" in shown, shown
    assert raw(done.stdout) == [], done.stdout
