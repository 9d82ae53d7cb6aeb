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
    ],
)
def test_secret_shapes_are_redacted(text: str, secret: str):
    out = SecretRedactor()(text)
    assert secret not in out and MARK in out


@pytest.mark.parametrize("text", ["upstream: 502 at 10:00 port: 8080", "tokens: 12", "no secrets here"])
def test_ordinary_lines_are_left_alone(text: str):
    assert SecretRedactor()(text) == text


def test_configured_values_go_first():
    assert SecretRedactor(["xyz-very-secret"])("value xyz-very-secret end") == f"value {MARK} end"
