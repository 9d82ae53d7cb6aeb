"""Markdown (what models write) -> Slack mrkdwn (what Slack renders).

Slack is not Markdown: `**b**` is `*b*`, `[t](u)` is `<u|t>`, there are no headings or tables, and `&`, `<`
and `>` are control characters that must be escaped. Code (fenced and inline) is kept verbatim apart from
that escaping; tables become aligned code blocks so their columns survive."""

from __future__ import annotations

import re

FENCE_RE = re.compile(r"^\s*```")
TABLE_SEP_RE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
HEADING_RE = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
BULLET_RE = re.compile(r"^(\s*)[-*+]\s+(?!\[[ xX]\]\s)(.*)$")
TASK_RE = re.compile(r"^(\s*)[-*+]\s+\[([ xX])\]\s+(.*)$")
RULE_RE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
QUOTE_RE = re.compile(r"^(\s*)>\s?(.*)$")

INLINE_CODE_RE = re.compile(r"(`+)(.+?)\1")
IMAGE_RE = re.compile(r"!\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
LINK_RE = re.compile(r"\[([^\]]+)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
AUTOLINK_RE = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
SLACK_TOKEN_RE = re.compile(r"<(?:[@#][A-Za-z0-9^|_-]+[^>]*)>")  # <@U123>, <#C123|x>; never <!here>
BOLD_RE = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
ITALIC_STAR_RE = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
STRIKE_RE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
PLACEHOLDER_RE = re.compile("\x00(\\d+)\x00")


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class _Protected:
    """Pieces already in final form, hidden behind placeholders while the rest is rewritten."""

    def __init__(self) -> None:
        self.pieces: list[str] = []

    def hide(self, final: str) -> str:
        self.pieces.append(final)
        return f"\x00{len(self.pieces) - 1}\x00"

    def restore(self, text: str) -> str:
        # pieces nest (a bold span around inline code), but never deeper than the number of pieces
        for _ in range(len(self.pieces) + 1):
            if not PLACEHOLDER_RE.search(text):
                break
            text = PLACEHOLDER_RE.sub(self._piece, text)
        return text

    def _piece(self, match: re.Match[str]) -> str:
        index = int(match.group(1))
        return self.pieces[index] if index < len(self.pieces) else "\ufffd"


def _link(url: str, label: str) -> str:
    label = label.replace("|", "¦").strip()
    url = escape(url.replace("|", "%7C"))
    return f"<{url}|{escape(label)}>" if label and label != url else f"<{url}>"


def inline(text: str) -> str:
    """Convert one line (outside code blocks)."""
    keep = _Protected()
    text = INLINE_CODE_RE.sub(lambda m: keep.hide(f"`{escape(m.group(2))}`"), text)
    text = SLACK_TOKEN_RE.sub(lambda m: keep.hide(m.group(0)), text)
    text = IMAGE_RE.sub(lambda m: keep.hide(_link(m.group(2), m.group(1) or m.group(2))), text)
    text = LINK_RE.sub(lambda m: keep.hide(_link(m.group(2), inline(m.group(1)))), text)
    text = AUTOLINK_RE.sub(lambda m: keep.hide(f"<{m.group(1)}>"), text)
    text = escape(text)
    text = BOLD_RE.sub(lambda m: keep.hide(f"*{m.group(2).replace('*', '')}*"), text)
    text = ITALIC_STAR_RE.sub(lambda m: f"_{m.group(1)}_", text)
    text = STRIKE_RE.sub(lambda m: f"~{m.group(1)}~", text)
    return keep.restore(text)


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)]


def table_block(lines: list[str]) -> list[str]:
    """A Markdown table (header, separator, rows) as an aligned code block."""
    rows = [_cells(line) for i, line in enumerate(lines) if i != 1]
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    sizes = [max(len(r[c]) for r in rows) for c in range(width)]

    def fmt(row: list[str]) -> str:
        return "  ".join(cell.ljust(sizes[i]) for i, cell in enumerate(row)).rstrip()

    out = ["```", fmt(rows[0]), "  ".join("-" * s for s in sizes)]
    out += [fmt(r) for r in rows[1:]]
    out.append("```")
    return [escape(line) if line != "```" else line for line in out]


def _is_table_start(lines: list[str], i: int) -> bool:
    return "|" in lines[i] and i + 1 < len(lines) and bool(TABLE_SEP_RE.match(lines[i + 1])) \
        and "|" in lines[i + 1]


def block_line(line: str) -> str:
    """Convert one non-code, non-table line: headings, bullets, rules, quotes, then inline markup."""
    if m := HEADING_RE.match(line):
        return f"*{inline(m.group(1)).replace('*', '')}*"
    if RULE_RE.match(line):
        return "──────────"
    if m := TASK_RE.match(line):
        box = "☑" if m.group(2).lower() == "x" else "☐"
        return f"{m.group(1)}{box} {inline(m.group(3))}"
    if m := BULLET_RE.match(line):
        return f"{m.group(1)}• {inline(m.group(2))}"
    if m := QUOTE_RE.match(line):
        return f"{m.group(1)}> {inline(m.group(2))}"  # a leading '>' stays unescaped: it is Slack's quote
    return inline(line)


def to_mrkdwn(markdown: str) -> str:
    # NUL is our placeholder marker: model text must never contain one
    lines = markdown.replace("\x00", "\ufffd").replace("\r\n", "\n").split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if FENCE_RE.match(line):
            # Slack shows a language tag as code text, so drop it; keep the body verbatim (escaped).
            indent = line[: len(line) - len(line.lstrip())]
            out.append("```")
            i += 1
            while i < len(lines) and not FENCE_RE.match(lines[i]):
                body = lines[i]
                out.append(escape(body[len(indent):] if body.startswith(indent) else body))
                i += 1
            out.append("```")
            i += 1
            continue
        if _is_table_start(lines, i):
            j = i + 2
            while j < len(lines) and "|" in lines[j] and lines[j].strip():
                j += 1
            out.extend(table_block(lines[i:j]))
            i = j
            continue
        out.append(block_line(line))
        i += 1
    return "\n".join(out)
