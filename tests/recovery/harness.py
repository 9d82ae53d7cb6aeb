"""`yokebot run` as a real process against the fake Slack (Socket Mode) and the fake model: start it, kill it
with SIGKILL, start it again."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAI, Step
from tests.fakes.pgbouncer import direct_of
from tests.fakes.slack_server import FakeSlack
from tests.helpers import free_port, write_agent

OPS_AGENT = """
description: ops
max_iterations: 4
tools:
  notify: {}
  current_time: {}
notify:
  default: "slack:#ops-alerts"
  allowed: ["slack:#ops-alerts"]
"""



def run_env(tmp: Path, db_url: str, slack: FakeSlack, llm: FakeOpenAI, **extra: str) -> dict[str, str]:
    agents = tmp / "agents"
    write_agent(agents, "ops", OPS_AGENT)
    return {**os.environ, "YOKEBOT_DATABASE_URL": db_url, "YOKEBOT_AGENTS_DIR": str(agents),
            "YOKEBOT_DEFAULT_AGENT": "ops", "OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "sk-test-123456",
            "YOKEBOT_MODEL": "test-model", "YOKEBOT_MODEL_MAX_ATTEMPTS": "1",
            "SLACK_BOT_TOKEN": "xoxb-recovery-test", "SLACK_APP_TOKEN": "xapp-recovery-test",
            "SLACK_API_URL": slack.api_url, "YOKEBOT_HTTP_PORT": str(free_port()), "YOKEBOT_HTTP_HOST": "127.0.0.1",
            "YOKEBOT_SCHEDULER_ENABLED": "false", "YOKEBOT_INBOX_LEASE_SECONDS": "2", "YOKEBOT_LOG_LEVEL": "INFO",
            # replies are counted as posted thread messages: no live status message (tests/chat/test_progress_*)
            "YOKEBOT_PROGRESS_LIVE": "false",
            **({"YOKEBOT_DATABASE_DIRECT_URL": direct} if (direct := direct_of(db_url)) else {}),
            **extra}


class Bot:
    """One `yokebot run` process; its output goes to a file (a pipe nobody reads could fill and block it)."""

    def __init__(self, env: dict[str, str], cwd: Path, name: str) -> None:
        self.log = cwd / f"{name}.log"
        self.proc = subprocess.Popen([sys.executable, "-m", "bot", "run"], env=env, cwd=cwd,
                                     stdout=self.log.open("w"), stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text()

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def wait_until(predicate: Any, timeout: float, what: str, bot: Bot | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if bot is not None and bot.proc.poll() is not None:
            raise AssertionError(f"yokebot exited while waiting for {what}:\n{bot.output()[-3000:]}")
        if time.monotonic() > deadline:
            tail = bot.output()[-3000:] if bot is not None else ""
            raise AssertionError(f"timed out waiting for {what}\n{tail}")
        time.sleep(0.05)



def killed_after_posting(env: dict[str, str], tmp: Path, db_url: str, fake: Any, ask: Any, answers: Any,
                         connected: str, ready_within: float) -> tuple[Any, list[Any]]:
    """A bot asked by `ask()` posts its answer but the platform's reply to that post is held (fake.hold_posts)
    when it is kill -9ed; a second instance takes the row over. Returns (what `ask` returned, the inbox rows
    (state, note)) once the second one has stopped, a second answer having had 0.5 s to come."""
    from tests.helpers import db_rows
    from tests.recovery.test_instances import readyz

    fake.hold_posts()
    first = Bot(env, tmp, "first")
    try:
        wait_until(lambda: readyz(env["YOKEBOT_HTTP_PORT"]) == 200, ready_within, connected, first)
        asked = ask()
        wait_until(lambda: answers(asked), 15, "the answer in the thread", first)
    finally:
        first.kill9()
        fake.release_posts()
    second = Bot(env, tmp, "second")

    def rows() -> list[Any]:
        return asyncio.run(db_rows(db_url, "SELECT state, note FROM inbox"))

    try:
        wait_until(lambda: rows()[0][0] != "running", 30, "the row taken over and closed", second)
        time.sleep(0.5)  # a second answer would have come by now
    finally:
        assert second.stop() == 0, second.output()[-3000:]
    return asked, rows()

# --- a model caught mid-turn by a kill -9 (the live-progress recovery tests) --------------------------------
THINKS = "how is host 1?"  # the model is still thinking at the kill: the status message says "thinking…"
WRITES = "how is host 2?"  # the model is half-way through writing its answer at the kill
HALF = "Host 2 looks degraded: the upstream answered 502 for a while, and then " * 4


class MidTurnModel:
    """Before `fast`: THINKS never gets an answer, WRITES streams a few fragments of HALF and then crawls.
    After: every question gets `answer: <question>` at once."""

    def __init__(self) -> None:
        self.fast = False

    def __call__(self, body: dict[str, Any]) -> Step:
        question = str([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
        if self.fast:
            return Step("reply", content=f"answer: {question.split('> ', 1)[-1]}", chunk_delay=0.01)
        if WRITES in question:
            return Step("reply", content=HALF, chunk_delay=1.0)  # a few fragments, then a very slow writer
        return Step("reply", content="never seen", delay=60.0)
