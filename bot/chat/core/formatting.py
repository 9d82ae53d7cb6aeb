"""Platform-neutral output helpers: split long text on line and code-fence boundaries, and take the teeth out
of broadcast pings in the final text a platform receives."""

from __future__ import annotations

import re

FENCE = "```"

# Slack's special commands: <!channel>, <!here>, <!everyone>, <!subteam^ID|label>, and a Markdown link whose
# target is one of them once converted (`[wake up](!channel)` -> `<!channel|wake up>`). Any `<!` counts, so
# a form Slack adds later, or one cut in half by a split, is defused too.
_SLACK_SPECIAL = re.compile(r"<!([^<>]*)(>?)")
# Written plainly, @channel / @here / @everyone ping on Discord (and on Slack with link_names).
_AT_BROADCAST = re.compile(r"(?<![\w.+-])@(channel|here|everyone)\b", re.IGNORECASE)
_WORD_JOINER = "\u2060"  # invisible: the text reads the same, but no longer names the ping
# Markdown a Slack stream (`markdown_text`) renders itself: a link or image whose target is a broadcast
# (`[all hands](!channel)`, `![x](<!everyone>)`, a reference `[1]: !here`). A word joiner after the `]` makes it
# plain text. The target may follow `(` after spaces, `<` or the `&lt;` the step above leaves.
_MD_BROADCAST_LINK = re.compile(r"\](?=\(\s*(?:<|&lt;)?\s*!)")
_MD_BROADCAST_DEF = re.compile(r"^([ \t]*\[[^\]\n]*\]):(?=[ \t]*(?:<|&lt;)?[ \t]*!)", re.MULTILINE)


def defuse_broadcasts(text: str, platform: str) -> str:
    """The last step before a chat platform's API receives `text` (answers, notify, schedules, errors): no
    broadcast ping survives, whatever conversion produced it. Slack shows `<!here>` as text; Discord and
    Slack show `@everyone` with a word joiner after the `@`."""
    if platform == "slack":
        text = _SLACK_SPECIAL.sub(lambda m: f"&lt;!{m.group(1)}{'&gt;' if m.group(2) else ''}", text)
        text = _MD_BROADCAST_DEF.sub(lambda m: f"{m.group(1)}{_WORD_JOINER}:", text)
        text = _MD_BROADCAST_LINK.sub(f"]{_WORD_JOINER}", text)
    return _AT_BROADCAST.sub(lambda m: f"@{_WORD_JOINER}{m.group(1)}", text)


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
