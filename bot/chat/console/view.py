"""How the terminal front end shows a turn: tool calls as they happen, alerts, and the answer.

Everything that came from a model, a tool or a log is put on screen as `rich.text.Text`, never parsed as
Rich markup: `[/api/v1]` or nginx's `[error]` are shown as written, and cannot break the console. Answers
are printed line for line, as the model wrote them (no Markdown re-flow, link URLs kept)."""

from __future__ import annotations

import json

from rich.console import Console
from rich.text import Text

from bot.redact import printable

STATUS_STYLE = {"ok": "green", "error": "red", "denied": "yellow"}


def short(value: object, limit: int = 120) -> str:
    """One line, at most `limit` characters: for previews of arguments and results."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_start(name: str, arguments: object) -> Text:
    return Text.assemble(("→ ", "dim"), (name, "dim"), ("(", "dim"), (short(arguments), "dim"), (")", "dim"))


def tool_end(status: str, content: object) -> Text:
    style = STATUS_STYLE.get(status, "white")
    return Text.assemble(("  ← ", style), (status, style), " ", (short(content), "dim"))


def answer(text: str | None) -> Text:
    """The answer as the model wrote it: lines kept, no markup, no emoji codes replaced."""
    return Text(text or "(no answer)")


def alert(target: str, text: str, note: str) -> Text:
    head = Text.assemble(("⚠ alert", "bold yellow"), (f" for {target}", "yellow"), (f" ({note})", "dim"))
    return Text.assemble(head, "\n", text)


def error(message: str) -> Text:
    return Text.assemble(("error: ", "red"), message)


def print_text(console: Console, text: Text) -> None:
    """Print without Rich's highlighting (numbers, URLs) or emoji codes touching the content, and with every
    control character shown as U+FFFD: Rich writes ESC sequences as they are, and an answer can quote a log
    line an attacker wrote. (One for one, so the styles' spans still fit.)"""
    text.plain = printable(text.plain)
    console.print(text, highlight=False, emoji=False, soft_wrap=True)
