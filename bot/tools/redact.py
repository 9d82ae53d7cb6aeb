"""Secrets out of tool output before the model or the audit table sees it: the configured secret values,
Authorization headers, and the shapes of common keys and tokens."""

from __future__ import annotations

import re
from collections.abc import Iterable

MARK = "[REDACTED]"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # header values: keep the name, drop the credentials
    (
        re.compile(
            r"(?i)\b(authorization|proxy-authorization)(\s*[:=]\s*)(?:(bearer|basic|token|bot)\s+)?"
            r"[^\s,;'\"]+"
        ),
        r"\1\2\3 " + MARK,
    ),
    (
        re.compile(r"(?i)\b(x-api-key|api-key|x-auth-token|cookie|set-cookie)(\s*:\s*)[^\r\n]+"),
        r"\1\2" + MARK,
    ),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S), MARK),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), MARK),  # Slack bot/user tokens
    (re.compile(r"\bxapp-[A-Za-z0-9-]{10,}"), MARK),  # Slack app tokens
    (re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"), MARK),  # OpenAI / Anthropic keys
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{30,}"), MARK),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), MARK),  # AWS access key ids
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), MARK),  # Google API keys
    (re.compile(r"\b[MN][A-Za-z\d_-]{23,27}\.[A-Za-z\d_-]{6}\.[A-Za-z\d_-]{27,40}\b"), MARK),  # Discord bot
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MARK),  # JWTs
    # URL passwords, up to the last @ before the host (a password may contain @)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+:)[^\s/]+@(?=[^@\s]*(?:[/\s]|$))"), r"\1" + MARK + "@"),
    (
        # key = value, key: value, "key": "value" (JSON), key="value"
        re.compile(
            r"(?i)\b([A-Za-z0-9_.-]*(?:password|passwd|secret|api_?key|access_?key|token|private_?key)"
            r"[A-Za-z0-9_.-]*[\"']?)(\s*[:=]\s*)(?!\d{1,9}\b)(\"[^\"]*\"|'[^']*'|[^\s,;&}]+)"
        ),
        r"\1\2" + MARK,
    ),
    # --password VALUE, --token VALUE on a command line
    (re.compile(r"(?i)(--(?:password|passwd|secret|token|api-key)\s+)\S+"), r"\1" + MARK),
    # <password>value</password>
    (re.compile(r"(?i)(<(password|secret|token|api_?key)>)[^<]*(</\2>)"), r"\1" + MARK + r"\3"),
)


class SecretRedactor:
    """Callable `text -> text`. Configured values are replaced first (longest first), then the patterns."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self.values = sorted({v for v in values if len(v) >= 6}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, MARK)
        for pattern, repl in _PATTERNS:
            text = pattern.sub(repl, text)
        return text
