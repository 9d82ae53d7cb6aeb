"""Log lines of a turn carry its session and trace id; secrets never reach a log line."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from bot.app import App
from bot.engine.service import TurnRequest
from bot.observability.logs import configure, setup_logging
from bot.redact import MARK as REDACTED
from bot.redact import SecretRedactor as Redactor
from tests.fakes.openai_server import FakeOpenAI, call


@pytest.fixture
def captured() -> Iterator[list[io.StringIO]]:
    """Restores the root logger after the test: setup_logging configures the process."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    streams: list[io.StringIO] = []
    yield streams
    root.handlers[:] = handlers
    root.setLevel(level)


def lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


async def test_every_line_of_a_turn_carries_session_and_trace_id(bot: App, fake_llm: FakeOpenAI, captured):
    stream = io.StringIO()
    setup_logging(bot.settings.model_copy(update={"log_format": "json"}), stream=stream)
    logging.getLogger("test").info("before the turn")
    fake_llm.calls(call("boom", {"reason": "kaput"})).reply("it broke")
    result = await bot.service.handle(TurnRequest("slack", "C1", "t1", "go", "tester", trigger="mention"))
    logging.getLogger("test").info("after the turn")

    records = [r for r in lines(stream) if r["logger"] != "aiohttp.access"]  # the fake server's thread
    during = records[1:-1]
    assert records[0]["message"] == "before the turn" and records[0]["session_id"] is None
    assert records[-1]["message"] == "after the turn" and records[-1]["trace_id"] is None
    assert {r["session_id"] for r in during} == {result.session_id}
    assert {r["trace_id"] for r in during} == {result.turn_id}
    messages = [r["message"] for r in during]
    assert messages[0].startswith("turn started: agent=tester trigger=mention")
    assert any(m == "tool boom raised" for m in messages)  # the executor's own warning, with its traceback
    assert "RuntimeError: kaput" in next(r for r in during if r["message"] == "tool boom raised")["exception"]
    assert messages[-1].startswith("turn finished: status=ok iterations=2")


async def test_text_format_is_human_readable_with_the_ids(bot: App, fake_llm: FakeOpenAI, captured):
    stream = io.StringIO()
    setup_logging(bot.settings, stream=stream)
    fake_llm.reply("hi")
    result = await bot.service.handle(TurnRequest("slack", "C1", "t1", "go", "tester"))
    finished = next(line for line in stream.getvalue().splitlines() if "turn finished" in line)
    assert f"INFO bot.turns [session={result.session_id} trace={result.turn_id}]: turn finished" in finished


def test_configured_once_even_when_called_twice(captured):
    first, second = io.StringIO(), io.StringIO()
    configure(logging.INFO, "text", stream=first)
    configure(logging.INFO, "json", stream=second)
    logging.getLogger("x").warning("once")
    assert first.getvalue() == "" and len(lines(second)) == 1


def test_secrets_and_token_shapes_are_redacted(bot: App, captured):
    stream = io.StringIO()
    settings = bot.settings.model_copy(update={"log_format": "json"})
    setup_logging(settings, stream=stream)
    key = settings.openai_api_key.get_secret_value()  # type: ignore[union-attr]
    log = logging.getLogger("leaky")
    log.warning("calling with key %s", key)
    log.warning("slack xoxb-1234567890-abcdefghij and xapp-1-A0123-456-abcdef, "
                "header Bearer abc.def.ghijklmn")
    try:
        raise RuntimeError(f"bad key {key}")
    except RuntimeError:
        log.exception("failed")
    out = stream.getvalue()
    assert key not in out and "xoxb-1234567890" not in out and "xapp-1-A0123" not in out
    assert "abc.def.ghijklmn" not in out
    records = lines(stream)
    assert records[0]["message"] == f"calling with key {REDACTED}"
    assert f"RuntimeError: bad key {REDACTED}" in records[2]["exception"]


def test_redactor_leaves_ordinary_text_alone():
    redact = Redactor(["hunter2-secret"])
    ordinary = "task-runner sk-learn skipped, disk 93% full"
    assert redact(ordinary) == ordinary
    assert redact("pw hunter2-secret!") == f"pw {REDACTED}!"


async def test_an_endpoint_error_page_reaches_the_log_as_one_line_without_escape_sequences(
        bot: App, fake_llm: FakeOpenAI, captured):
    # a hostile or broken model endpoint answers 200 with a page that carries a terminal escape (OSC 52 writes
    # the clipboard; ESC[2J clears the screen) and a forged log line; the log line quoting it must carry neither
    stream = io.StringIO()
    setup_logging(bot.settings, stream=stream)
    page = "oops\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b[2J\n2026-11-30 00:00:00,000 INFO bot.turns: all good\x9b31m"
    fake_llm.raw(page.encode())
    await bot.service.handle(TurnRequest("slack", "C1", "t-escape", "go", "tester"))
    out = stream.getvalue()
    assert "oops" in out  # the detail is logged...
    assert not any(c in out for c in ("\x1b", "\x07", "\x9b"))  # ...without a control character
    assert not any(line.startswith("2026-11-30 00:00:00,000 INFO") for line in out.splitlines())
