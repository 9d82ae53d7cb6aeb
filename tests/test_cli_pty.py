"""`yokebot chat` on a real terminal: a pseudo-terminal (pexpect), prompt_toolkit's prompt, keys typed as a
user types them (Ctrl-C is the terminal's SIGINT mid-turn, a key at the prompt), the fake model server."""

from __future__ import annotations

import json
import re
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pexpect
import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.test_cli import ROOT, base_env, yokebot
from tests.test_cli_console import ops_with_notify

pytestmark = pytest.mark.slow
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")


class Terminal:
    """A `yokebot chat` on a pty; `screen` is everything it wrote, escape sequences taken out."""

    def __init__(self, env: dict[str, str]) -> None:
        env = {**env, "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1", "PYTHONUNBUFFERED": "1"}
        self.child = pexpect.spawn(sys.executable, ["-m", "bot", "chat"], cwd=str(ROOT), env=env,
                                   dimensions=(40, 200), encoding="utf-8", codec_errors="replace")
        self.raw = ""

    @property
    def screen(self) -> str:
        return ANSI.sub("", self.raw).replace("\r", "")

    def pump(self) -> None:
        try:
            self.raw += self.child.read_nonblocking(65536, timeout=0.05)
        except pexpect.TIMEOUT:
            pass
        except pexpect.EOF:
            time.sleep(0.05)

    def until(self, predicate: Callable[[], object], what: str, timeout: float = 30.0) -> None:
        """Read the terminal (so that its writes never block) until `predicate()` holds."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen:\n{self.screen[-3000:]}")
            self.pump()

    def shows(self, text: str, after: int = 0) -> Callable[[], bool]:
        return lambda: text in self.screen[after:]

    def prompt(self, after: int = 0) -> None:
        self.until(self.shows("you>", after), "the prompt")

    def type(self, keys: str) -> int:
        """Type `keys`; where the screen was before (to look for what follows)."""
        mark = len(self.screen)
        self.child.send(keys)
        return mark

    def exit_code(self, timeout: float = 30.0) -> int:
        self.until(lambda: not self.child.isalive(), "chat to exit", timeout)
        self.child.close()
        return self.child.exitstatus if self.child.exitstatus is not None else 128 + self.child.signalstatus

    def close(self) -> None:
        if self.child.isalive():
            self.child.kill(signal.SIGKILL)
        self.child.close(force=True)


def turns_of(env: dict[str, str]) -> list[dict[str, object]]:
    sessions = json.loads(yokebot("sessions", "--json", env=env).stdout)
    return json.loads(yokebot("trace", sessions[0]["id"], "--json", env=env).stdout)["turns"]


def test_ctrl_c_on_a_terminal_stops_the_turn_as_the_users_choice_and_ctrl_d_leaves(
        tmp_path: Path, fake_llm: FakeOpenAI):
    ops_with_notify(tmp_path)
    fake_llm.hang(60)  # longer than the test: only a stop ends this turn
    fake_llm.reply("Second answer.")
    env = base_env(tmp_path, fake_llm)
    term = Terminal(env)
    try:
        term.prompt()
        term.type("a long question\r")
        term.until(lambda: len(fake_llm.requests) == 1, "the model call")
        mark = term.type("\x03")  # Ctrl-C: the terminal sends SIGINT to chat
        term.until(term.shows("stopped", mark), "the turn to stop", timeout=15)
        term.prompt(mark)
        mark = term.type("second question\r")
        term.until(term.shows("Second answer.", mark), "the second answer")
        term.prompt(mark)
        term.type("\x04")  # Ctrl-D at the prompt
        assert term.exit_code() == 0
    finally:
        term.close()
    assert "Traceback" not in term.screen
    turns = turns_of(env)
    assert [(t["status"], t["stopped_by"]) for t in turns] == [("stopped", "user"), ("ok", "answer")]
    shown = yokebot("trace", json.loads(yokebot("sessions", "--json", env=env).stdout)[0]["id"], env=env).stdout
    assert "stopped by the user" in shown and "error" not in shown.split("Turn 2")[0]


def test_ctrl_d_during_a_turn_leaves_after_its_answer_and_a_line_typed_ahead_is_answered_first(
        tmp_path: Path, fake_llm: FakeOpenAI):
    ops_with_notify(tmp_path)
    fake_llm.reply("First answer.", delay=3)
    fake_llm.reply("Answer to the line typed ahead.")
    env = base_env(tmp_path, fake_llm)
    term = Terminal(env)
    try:
        term.prompt()
        term.type("first question\r")
        term.until(lambda: len(fake_llm.requests) == 1, "the model call")
        term.type("typed while it worked\r")
        mark = term.type("\x04")  # Ctrl-D while the turn runs
        term.until(term.shows("leaving when this turn ends", mark), "chat to acknowledge Ctrl-D")
        assert term.exit_code() == 0
    finally:
        term.close()
    assert "First answer." in term.screen and "Answer to the line typed ahead." in term.screen
    assert fake_llm.requests[1]["messages"][-1]["content"] == "typed while it worked"
    assert [t["status"] for t in turns_of(env)] == ["ok", "ok"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_or_sighup_mid_turn_ends_it_interrupted_and_chat_exits(
        tmp_path: Path, fake_llm: FakeOpenAI, signum: int):
    ops_with_notify(tmp_path)
    fake_llm.hang(60)
    env = base_env(tmp_path, fake_llm)
    term = Terminal(env)
    try:
        term.prompt()
        term.type("a long question\r")
        term.until(lambda: len(fake_llm.requests) == 1, "the model call")
        term.child.kill(signum)
        assert term.exit_code(timeout=20) == 128 + signum
    finally:
        term.close()
    (turn,) = turns_of(env)
    assert (turn["status"], turn["stopped_by"]) == ("error", "interrupted"), turn
    assert "Traceback" not in term.screen


def test_chat_commands_never_reach_the_model_and_chat_says_which_conversation_it_continues(
        tmp_path: Path, fake_llm: FakeOpenAI):
    """docs/commands.md: /help, /status, /new, /reset, /file, /quit are the terminal's; a conversation from
    before is named at start."""
    import asyncio

    from bot.app import build_app
    from bot.engine.service import TurnRequest
    from tests.conftest import make_settings

    ops_with_notify(tmp_path)
    env = base_env(tmp_path, fake_llm)
    fake_llm.reply("Earlier answer.")

    async def earlier() -> str:  # a conversation held before this chat started
        settings = make_settings(env["YOKEBOT_DATABASE_URL"], fake_llm, tmp_path / "agents", model="cli-model",
                                 default_agent="ops")
        app = await build_app(settings, metrics=False)
        try:
            result = await app.service.handle(TurnRequest("console", "terminal", "ops", "earlier question", "ops",
                                                          trigger="console"))
            return result.session_id
        finally:
            await app.close()

    session = asyncio.run(earlier())
    fake_llm.reply("Second answer.")
    term = Terminal({**env, "YOKEBOT_DEFAULT_AGENT": "ops"})
    try:
        term.prompt()
        assert f"continuing session {session[:4]}…, 1 turn; /new starts afresh" in term.screen
        # facts in dim, not in the warning colour: where the agent came from, the conversation it continues
        for fact in ("agent ops from", f"continuing session {session[:4]}"):
            line = next(raw for raw in term.raw.splitlines() if fact in ANSI.sub("", raw))
            assert "\x1b[2m" in line and "\x1b[33m" not in line, repr(line)
        mark = term.type("/help\r")
        term.until(term.shows("/usage [today|7d]", mark), "the help")
        term.prompt(mark)
        mark = term.type("/status\r")
        term.until(term.shows("yokebot is up.", mark), "the status")
        assert "agent `ops` answers (model `cli-model`)" in term.screen[mark:]
        term.prompt(mark)
        assert "thinking" not in term.screen[mark:]  # no model is asked: no spinner says so
        mark = term.type("/frobnicate\r")
        term.until(term.shows("(/frobnicate is not a command here; /help lists them)", mark), "the refusal")
        mark = term.type("/reset\r")
        term.until(term.shows("Done: I have forgotten", mark), "the reset")
        (tmp_path / "notes.txt").write_text("kept for later\n")
        mark = term.type(f"/file {tmp_path / 'notes.txt'}\r")
        term.until(term.shows("(attached 'notes.txt' to your next message)", mark), "the attachment")
        mark = term.type("/new\r")
        term.until(term.shows("(a fresh conversation", mark), "a new conversation")
        term.until(term.shows("'notes.txt' no longer attached: /file it again to send it)", mark), "the drop")
        mark = term.type("second question\r")
        term.until(term.shows("Second answer.", mark), "the answer")
        term.prompt(mark)
        term.type("/quit\r")
        assert term.exit_code() == 0
    finally:
        term.close()
    assert "Traceback" not in term.screen
    asked = [r["messages"][-1]["content"] for r in fake_llm.requests]
    assert asked == ["earlier question", "second question"]  # no command reached the model
    second = fake_llm.requests[1]["messages"]
    assert not any(m.get("content") == "earlier question" for m in second)  # /new: a fresh conversation
