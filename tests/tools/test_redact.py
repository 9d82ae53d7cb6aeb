"""Secret shapes found in real logs and configs: JSON, command lines, XML, URLs with '@' in the password."""

from __future__ import annotations

import pytest

from bot.redact import MARK, SecretRedactor


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ('{"password": "hunter2"}', "hunter2"),
        ('{"api_key":"AbCdEf123456"}', "AbCdEf123456"),
        ('"token": "abcdef123456"', "abcdef123456"),
        ("postgres://app:p@ss@db.internal/prod", "p@ss"),
        ("pg_dump --password hunter2 prod", "hunter2"),
        ("<password>s3cret</password>", "s3cret"),
        ("DB_PASSWORD=s3cret-value", "s3cret-value"),
        ("Authorization: Bearer abc.def.ghi", "abc.def.ghi"),
        # glued to a word, as in a tool name the model made up or an identifier in a log (issue 37)
        ("execute_tool deploy_xoxb-1234567890-abcdefgh", "xoxb-1234567890-abcdefgh"),
        ("x_sk-proj-abcdefghijklmnopqrstuvwxyz12", "sk-proj-abcdefghijklmnopqrstuvwxyz12"),
        ("fooBearer q8Zt3LwX9pVr2mKc", "q8Zt3LwX9pVr2mKc"),
        ("key_AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
        ("tool_xapp-1-A0123456789-abcdef", "xapp-1-A0123456789-abcdef"),
    ],
)
def test_secret_shapes_are_redacted(text: str, secret: str):
    out = SecretRedactor()(text)
    assert secret not in out and MARK in out


@pytest.mark.parametrize("text", ["upstream: 502 at 10:00 port: 8080", "tokens: 12", "no secrets here",
                                  "disk-usage-report-for-all-hosts-today", "task-queue-consumer-group-primary"])
def test_ordinary_lines_are_left_alone(text: str):
    assert SecretRedactor()(text) == text


def test_configured_values_go_first():
    assert SecretRedactor(["xyz-very-secret"])("value xyz-very-secret end") == f"value {MARK} end"
