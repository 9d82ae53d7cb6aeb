"""Everywhere output is cut, it is redacted first: a secret the cut falls into never shows its first half
(read_file's max_bytes, a long log line, shell's output cap, the executor's cap), and the audit row's
arguments and the log lines are redacted by the same, one redactor. Control characters, the 8-bit C1 ones
included, never reach the model, the chat or a terminal."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from bot.engine.run.executor import ToolExecutor, ToolPolicy
from bot.observability.logs import configure
from bot.redact import MARK, SecretRedactor, cut
from tests.tools.conftest import Sandbox

# a configured secret with no recognisable shape (like SLACK_SIGNING_SECRET): only its whole value is known
SIGNING = "8f14e45fceea167a5a36dedd4bea2543"
OPENAI = "sk-proj-Q2xhdWRlIGlzIG5vdCBhIHNlY3JldCBrZXk1234"


def executor(sbx: Sandbox, max_output_chars: int = 16_000) -> ToolExecutor:
    return ToolExecutor(sbx.registry, ToolPolicy(max_output_chars=max_output_chars),
                        redact=SecretRedactor([SIGNING]))


def halves(secret: str) -> list[str]:
    return [secret[:n] for n in range(8, len(secret))]


def assert_no_part_of(secret: str, text: str) -> None:
    shown = [h for h in halves(secret) if h in text]
    assert not shown, f"the first {len(shown[-1])} characters of a secret are visible: {text[-120:]!r}"


@pytest.mark.parametrize("secret", [SIGNING, OPENAI])
@pytest.mark.parametrize("at", [5, 12, 20])
async def test_read_file_max_bytes_never_shows_half_a_secret(sandbox: Sandbox, secret: str, at: int):
    head = "[app]\nname = web\nsecret_value " * 3
    (sandbox.root / "app.ini").write_text(f"{head}{secret} tail\nmore = 1\n")
    result = await sandbox.call("read_file", {"path": str(sandbox.root / "app.ini"), "max_bytes": len(head) + at},
                                executor(sandbox))
    assert result.status == "ok" and "[cut: showed about the first" in result.content
    assert_no_part_of(secret, result.content)


async def test_a_long_log_line_is_redacted_before_it_is_cut(sandbox: Sandbox):
    filler = "GET /health 200 " * 255  # 4080 characters: the line is cut at 4096, inside the secret
    (sandbox.root / "long.log").write_text(f"{filler}{SIGNING} {OPENAI} end\n")
    for tool, args in [("tail_log", {"lines": 1}), ("grep_log", {"pattern": "health"})]:
        result = await sandbox.call(tool, {"path": str(sandbox.root / "long.log"), **args}, executor(sandbox))
        assert result.status == "ok" and "[line cut]" in result.content
        assert_no_part_of(SIGNING, result.content)


async def test_shell_output_cap_never_shows_half_a_secret(sandbox: Sandbox):
    lines = "".join(f"line {i:04d} ok\n" for i in range(400))[:4080]  # the cap is 4096 bytes
    (sandbox.root / "out.log").write_text(f"{lines}{SIGNING}\nrest\n" + "x\n" * 5000)
    result = await sandbox.call("shell", {"command": f"tail -n 9000 {sandbox.root / 'out.log'}"},
                                executor(sandbox))
    assert "[output cut after 4096 bytes" in result.content
    assert_no_part_of(SIGNING, result.content)


async def test_the_executor_cap_never_shows_half_a_secret(sandbox: Sandbox):
    (sandbox.root / "cfg").write_text("a b c " * 10 + f"{SIGNING} and more text after it\n")
    result = await sandbox.call("read_file", {"path": str(sandbox.root / "cfg")}, executor(sandbox, 75))
    assert "[output cut: about" in result.content
    assert_no_part_of(SIGNING, result.content)


async def test_audit_rows_hold_no_secret_in_the_arguments(sandbox: Sandbox):
    await sandbox.call("grep_log", {"path": str(sandbox.root / "error.log"), "pattern": SIGNING},
                       executor(sandbox))
    (row,) = sandbox.audit.tool_results
    assert SIGNING not in json.dumps(row.arguments) and MARK in json.dumps(row.arguments)


def test_cut_keeps_whole_words_and_blobs():
    assert cut("alpha beta gamma", 8, str) == ("alpha ", True)  # 'be' of 'beta' is not shown
    assert cut("alpha beta gamma", 6, str) == ("alpha ", True)
    assert cut("x" * 5000, 100, str) == ("x" * 100, True)  # a blob is shown up to the cut
    assert cut("short", 100, str) == ("short", False)


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_log_lines_use_the_same_redactor_extras_included(restore_logging: None):
    stream = io.StringIO()
    configure(logging.INFO, "json", secrets=[SIGNING], stream=stream)
    log = logging.getLogger("leaky")
    log.warning("db at postgres://app:hunter2@db/prod key %s", OPENAI,
                extra={"url": "https://u:pw-in-extra@h/x", "sig": SIGNING})
    out = stream.getvalue()
    for secret in ("hunter2", OPENAI, "pw-in-extra", SIGNING):
        assert secret not in out
    assert MARK in json.loads(out)["message"]


C1 = "\u009b31mRED\u009d0;pwned\u0007 \u0085 \u009f end"


@pytest.mark.parametrize("tool", ["read_file", "tail_log", "grep_log", "shell"])
async def test_c1_control_characters_are_stripped_like_c0(sandbox: Sandbox, tool: str):
    log = sandbox.root / "c1.log"
    log.write_text(f"2024/05/01 10:00:00 [error] {C1}\n\x1b[2Jclear\n")
    args = {
        "read_file": {"path": str(log)},
        "tail_log": {"path": str(log)},
        "grep_log": {"path": str(log), "pattern": "end|clear"},
        "shell": {"command": f"tail -n 5 {log}"},
    }[tool]
    result = await sandbox.call(tool, args)
    assert result.status == "ok" and "RED" in result.content and "end" in result.content
    assert not any(0x80 <= ord(ch) <= 0x9F or ord(ch) == 0x1B or ord(ch) == 0x07 for ch in result.content)
