"""Regular expressions the model writes, matched by RE2 (the `google-re2` package): time linear in the text
searched, whatever the pattern. Python's `re` backtracks, so `(a|a)*b` over a line of `a`s would never end
and a thread stuck in it cannot be stopped; with RE2 no such pattern exists. RE2 has no backreferences and
no lookaround: such a pattern is refused with one sentence that says so."""

from __future__ import annotations

from dataclasses import dataclass

import re2

from bot.engine.errors import ToolFailed

MAX_PATTERN_CHARS = 300
MAX_PROGRAM_BYTES = 8 << 20  # RE2's memory budget for one compiled pattern (a{1000}{1000} does not fit)
_HINTS = {
    "invalid perl operator": " (lookahead and lookbehind like (?=...) or (?<!...) are not supported)",
    "invalid escape sequence": " (backreferences like \\1 and some escapes are not supported)",
    "bad repetition operator": " (a quantifier must follow something it can repeat)",
    "pattern too large": " (the pattern needs too much memory; simplify it)",
}


@dataclass(frozen=True, slots=True)
class UserPattern:
    """A compiled pattern: `search_line` for one line; `search_block` for many lines at once (None when the
    pattern is anchored to the start or end of the text, where a block and a line differ)."""

    text: str
    ignore_case: bool
    _line: re2._Regexp[str]  # pyright: ignore[reportPrivateUsage]
    _block: re2._Regexp[str] | None  # pyright: ignore[reportPrivateUsage]

    def search_line(self, line: str) -> bool:
        return self._line.search(line) is not None

    @property
    def has_block_test(self) -> bool:
        return self._block is not None

    def search_block(self, block: str) -> bool:
        return self._block is None or self._block.search(block) is not None


def _options(ignore_case: bool) -> re2.Options:
    opts = re2.Options()
    opts.case_sensitive = not ignore_case
    opts.log_errors = False  # a bad pattern is the model's observation, not a line on our stderr
    opts.max_mem = MAX_PROGRAM_BYTES
    return opts


def _why(exc: re2.error) -> str:
    raw = exc.args[0] if exc.args else ""
    detail = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    hint = next((h for key, h in _HINTS.items() if detail.startswith(key)), "")
    return f"{detail}{hint}"


def compile_pattern(pattern: str, ignore_case: bool = False) -> UserPattern:
    if not pattern:
        raise ToolFailed("the pattern is empty")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolFailed(f"the pattern is longer than {MAX_PATTERN_CHARS} characters")
    try:
        line = re2.compile(pattern, _options(ignore_case))
        anchored = "\\A" in pattern or "\\z" in pattern
        block = None if anchored else re2.compile(f"(?m:{pattern})", _options(ignore_case))
    except re2.error as exc:
        raise ToolFailed(f"the pattern is not a valid regular expression (RE2 syntax): {_why(exc)}") from None
    return UserPattern(pattern, ignore_case, line, block)
