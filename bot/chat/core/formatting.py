"""Platform-neutral output helpers: split long text on line and code-fence boundaries, and take the teeth out
of the broadcast pings every platform shares (each platform's manifest adds its own syntax)."""

from __future__ import annotations

import re

FENCE = "```"

# Written plainly, @channel / @here / @everyone ping on Discord (and on Slack with link_names).
_AT_BROADCAST = re.compile(r"(?<![\w.+-])@(channel|here|everyone)\b", re.IGNORECASE)
WORD_JOINER = "\u2060"  # invisible: the text reads the same, but no longer names the ping


def defuse_at_broadcasts(text: str) -> str:
    """The step every platform's defusing ends with (its manifest's `defuse`, the last step before its API
    receives `text`): `@everyone`, `@here` and `@channel` get a word joiner after the `@`. A platform with
    broadcast syntax of its own takes that out first."""
    return _AT_BROADCAST.sub(lambda m: f"@{WORD_JOINER}{m.group(1)}", text)


def _hard_wrap(line: str, limit: int) -> list[str]:
    return [line[i : i + limit] for i in range(0, len(line), limit)] or [""]


def split_message(text: str, limit: int) -> list[str]:
    """Split `text` into chunks of at most `limit` characters, on line boundaries where possible.

    A code fence cut by a split is closed at the end of one chunk and reopened (with its language) at the
    start of the next, so every chunk renders on its own. Lines longer than a chunk are hard-wrapped."""
    if limit < 20:
        raise ValueError("limit too small to split safely")
    if len(text) <= limit:
        return [text]
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    fence: str | None = None  # the opening line of the fence we are inside, e.g. "```python"

    def flush() -> None:
        nonlocal current, size
        if not current:
            return
        body = "\n".join(current)
        if fence is not None:
            body += "\n" + FENCE
        chunks.append(body)
        current = [fence] if fence is not None else []
        size = len(fence) + 1 if fence is not None else 0

    for raw_line in text.split("\n"):
        reserve = len(FENCE) + 1  # room to close a fence at the end of the chunk
        for line in _hard_wrap(raw_line, limit - reserve - 40):
            if size + len(line) + 1 + reserve > limit and current and current != [fence]:
                flush()
            current.append(line)
            size += len(line) + 1
        stripped = raw_line.strip()
        if stripped.startswith(FENCE):
            fence = None if fence is not None else stripped
    if current and current != [fence]:
        chunks.append("\n".join(current))
    return [c for c in chunks if c.strip()]
