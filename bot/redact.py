"""The one redactor: secrets out of everything yokebot shows or stores (tool output before the model and the
audit table see it, log lines, error texts), and `cut`, the one way text is shortened, which redacts first.

Replaced: the configured secret values, Authorization headers, and the shapes of common keys and tokens."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import re2

MARK = "[REDACTED]"
Repl = str | Callable[[Any], str]


def _re(pattern: str) -> Any:
    """RE2, not `re`: the redactor runs over whatever a log holds, so its time must be linear in the text
    (with `re`, a URL-password pattern took minutes over 100 KB of `a.a.a.`, on the event loop)."""
    opts = re2.Options()
    opts.log_errors = False
    return re2.compile(pattern, opts)


def _assignment(m: Any) -> str:
    value: str = m.group(3)
    if _SMALL_NUMBER.match(value):  # port: 8080, tokens: 12 are not secrets
        return str(m.group(0))
    return f"{m.group(1)}{m.group(2)}{MARK}"


_SMALL_NUMBER = re.compile(r"\d{1,9}(?!\w)")
_WORDS = "password|passwd|secret|api_?key|access_?key|token|private_?key"

# A token glued to a word is still a token: `deploy_xoxb-…`, `x_sk-proj-…`, `fooBearer …` (a tool name the model
# made up, an identifier in a log). The distinctive prefixes (xox?-, xapp-, bearer) match anywhere; the shorter
# ones after a word boundary or an underscore, so `disk-usage-…` is not taken for an `sk-` key.
_PATTERNS: tuple[tuple[Any, Repl], ...] = (
    # header values: keep the name, drop the credentials
    (
        _re(
            r"(?i)\b(authorization|proxy-authorization)(\s*[:=]\s*)(?:(bearer|basic|token|bot)\s+)?"
            r"[^\s,;'\"]+"
        ),
        r"\1\2\3 " + MARK,
    ),
    (_re(r"(?i)\b(x-api-key|api-key|x-auth-token|cookie|set-cookie)(\s*:\s*)[^\r\n]+"), r"\1\2" + MARK),
    (_re(r"(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\z)"), MARK),
    (_re(r"(?i)(bearer)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + MARK),  # a bearer token anywhere, even glued on
    (_re(r"xox[abposre]-[A-Za-z0-9-]{8,}"), MARK),  # Slack bot/user/refresh tokens, even glued to a word
    (_re(r"xapp-[A-Za-z0-9-]{8,}"), MARK),  # Slack app tokens
    (_re(r"(?:\b|_)sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"), MARK),  # OpenAI / Anthropic keys
    (_re(r"(?:\b|_)(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}|(?:\b|_)github_pat_[A-Za-z0-9_]{30,}"), MARK),
    (_re(r"(?:\b|_)(?:AKIA|ASIA)[0-9A-Z]{16}\b"), MARK),  # AWS access key ids
    (_re(r"(?:\b|_)AIza[0-9A-Za-z_-]{35}\b"), MARK),  # Google API keys
    (_re(r"\b[A-Za-z\d_-]{23,}\.[A-Za-z\d_-]{6}\.[A-Za-z\d_-]{27,}"), MARK),  # Discord bot tokens
    (_re(r"(?:\b|_)eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MARK),  # JWTs
    # URL passwords, up to the last @ before the host (a password may contain @): the greedy run does that
    (_re(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+:)[^\s/]*@"), r"\1" + MARK + "@"),
    # key = value, key: value, "key": "value" (JSON), key="value"
    (
        _re(
            rf"(?i)\b([A-Za-z0-9_.-]*(?:{_WORDS})[A-Za-z0-9_.-]*[\"']?)(\s*[:=]\s*)"
            r"(\"[^\"]*\"|'[^']*'|[^\s,;&}]+)"
        ),
        _assignment,
    ),
    # --password VALUE, --token VALUE on a command line
    (_re(r"(?i)(--(?:password|passwd|secret|token|api-key)\s+)\S+"), r"\1" + MARK),
    # <password>value</password>
    (_re(r"(?i)(<(?:password|secret|token|api_?key)>)[^<]*(</(?:password|secret|token|api_?key)>)"),
     r"\1" + MARK + r"\2"),
)


# One pass that says whether any pattern could match: most text (a log line, a tool result) holds no secret,
# and one scan of the union costs about what one of the sixteen did.
_ANY = _re("|".join(f"(?:{pattern.pattern})" for pattern, _ in _PATTERNS))


class SecretRedactor:
    """Callable `text -> text`. Configured values are replaced first (longest first), then the patterns."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self.values = sorted({v for v in values if len(v) >= 6}, key=len, reverse=True)

    def add(self, values: Iterable[str]) -> None:
        """More values to replace (an MCP server's `${VAR}` values, known once the profiles are read)."""
        self.values = sorted({*self.values, *(v for v in values if len(v) >= 6)}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, MARK)
        if not _ANY.search(text):
            return text
        for pattern, repl in _PATTERNS:
            text = pattern.sub(repl, text)
        return text

    def find(self, text: str) -> tuple[int, int] | None:
        """Where the first secret this redactor would replace is (a guardrail's `secrets` rule), or None."""
        spots = [(i, i + len(v)) for v in self.values if (i := text.find(v)) >= 0]
        if (m := _ANY.search(text)) is not None:
            spots.append(m.span())
        return min(spots) if spots else None


PATTERNS_ONLY = SecretRedactor()

# What may not reach a terminal or a chat from a file, a program, a model or a log line: C0 controls (tab,
# line feed and carriage return kept), DEL, and the 8-bit C1 controls 0x80-0x9f (CSI \x9b and OSC \x9d
# start escape sequences on many terminals just as ESC [ does); and what makes text read otherwise than it
# is: the bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069: "Trojan Source"), the bidi
# marks (U+061C, U+200E, U+200F) and the zero-width characters (U+200B-U+200D, U+2060, U+FEFF), which hide
# inside a name that looks like another.
_CONTROLS = [*range(0, 9), 11, 12, *range(14, 32), *range(0x7F, 0xA0)]
_INVISIBLE = [0x061C, *range(0x200B, 0x2010), *range(0x202A, 0x202F), 0x2060, *range(0x2066, 0x206A), 0xFEFF]
_CONTROL = {c: "\ufffd" for c in [*_CONTROLS, *_INVISIBLE]}
_CONTROL_LINE = {**_CONTROL, 10: "\ufffd", 13: "\ufffd"}
_LONE_CR = re.compile("\r(?!\n)")


def printable(text: str, one_line: bool = False) -> str:
    """`text` with every control, bidi and zero-width character shown as U+FFFD (one for one: the length does
    not change); a carriage return is kept only before a line feed (alone, it sends the cursor back to
    overwrite the line); `one_line`: line breaks too. The one gate of the terminal (bot/chat/console/view.py,
    `Terminal`) and of whatever else shows untrusted text."""
    text = text.translate(_CONTROL_LINE if one_line else _CONTROL)
    return _LONE_CR.sub("\ufffd", text) if "\r" in text else text


_RAW_IN_JSON = re.compile("[\x7f-\x9f" + "".join(map(chr, _INVISIBLE)) + "]")


def printable_json(text: str) -> str:
    """JSON text (`json.dumps`, which escapes the C0 controls itself) with DEL, the C1 controls and the bidi
    and zero-width characters escaped too (\\u202e): the same data for a script, nothing a terminal acts on.
    They occur only inside strings, where the escape means the character itself."""
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# What a tool's result may not hold when the model reads it: the escape sequences a terminal acts on (CSI
# `ESC [ ... final`, OSC `ESC ] ... BEL or ESC \\`, their 8-bit forms \x9b and \x9d, and two-character ESC
# sequences), whole, and then every other C0 and C1 control but tab and line feed. RE2: linear in the text.
_SEQUENCE = _re(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
                r"|\x1b[ -/]*[0-~]")
_MODEL_CONTROL = dict.fromkeys([*range(0, 9), *range(11, 32), *range(0x7F, 0xA0)])
_ANY_MODEL_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def for_model(text: str) -> str:
    """`text` without escape sequences and control characters (tab and line feed kept): the one gate every
    tool result passes before the model reads it (the executor), so the audit row of the model's request
    holds none either. Removed, not shown: the model has no use for them, and would copy them into answers."""
    if not _ANY_MODEL_CONTROL.search(text):
        return text
    return _SEQUENCE.sub("", text).translate(_MODEL_CONTROL)


# A secret at a cut is recognised only whole: callers keep this much past the limit for `cut` to redact.
LOOKAHEAD = 2048
# A word cut in half is dropped whole up to this length; a longer run of non-space characters is a blob
# (base64, a minified line), shown up to the cut: a secret in it was redacted by the lookahead already.
MAX_DROPPED_WORD = 512


def cut(text: str, limit: int, redact: Callable[[str], str] = PATTERNS_ONLY) -> tuple[str, bool]:
    """Shorten `text` to at most `limit` characters, safely: redact ALL of `text` first (give it some
    LOOKAHEAD beyond the limit), then cut; the word the cut falls into (its run of non-space characters) is
    dropped whole (a word up to MAX_DROPPED_WORD characters long), so the first half of a secret, which no
    pattern recognises, is never shown. Returns (text, whether it was cut)."""
    text = redact(text)
    if len(text) <= limit:
        return text, False
    if text[limit].isspace():
        return text[:limit], True
    start = limit
    while start > 0 and not text[start - 1].isspace() and limit - start <= MAX_DROPPED_WORD:
        start -= 1
    stop = limit
    while stop < len(text) and not text[stop].isspace() and stop - start <= MAX_DROPPED_WORD:
        stop += 1
    if stop - start > MAX_DROPPED_WORD:
        start = limit  # a blob, not a word: shown up to the cut
    return text[:start], True
