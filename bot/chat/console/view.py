"""How the terminal front end shows a turn: tool calls as they happen, alerts, and the answer.

Everything that came from a model, a tool or a log is put on screen as `rich.text.Text`, never parsed as
Rich markup: `[/api/v1]` or nginx's `[error]` are shown as written, and cannot break the console. Answers
are printed line for line, as the model wrote them (no Markdown re-flow, link URLs kept).

`Terminal` is the console every command prints through (`chat`, `ask`, `sessions`, `trace`, `alerts test`...):
the one place where untrusted text meets the terminal."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleDimensions, ConsoleOptions, RenderableType
from rich.protocol import rich_cast
from rich.segment import Segment
from rich.text import Text

from bot.redact import printable


class Terminal(Console):
    """A rich Console that shows no control, bidi or zero-width character raw, whoever printed what: every
    text it renders passes `printable` (U+FFFD for each). Rich writes ESC sequences as they are, and a
    channel id, an alert label or a log line an attacker wrote would otherwise retitle the terminal, move its
    cursor or read backwards (U+202E). Strings are cleaned as they become texts (`render_str`, before a
    table measures them, so they still fit its columns), texts as they are rendered, and every other segment
    after, Rich's own control codes (the live view's cursor moves) excepted. Nested renderables (a table's
    cells, a tree's nodes) come back through `render` too.

    Piped (not a terminal, no COLUMNS, no width given), lines are not wrapped at Rich's default of 80 columns:
    a table's rows stay whole, so session ids and dates can be cut out of them by the next program."""

    PIPED_WIDTH = 1000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fixed_width = kwargs.get("width") is not None

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        if not self._fixed_width and not self.is_terminal and not os.environ.get("COLUMNS"):
            return ConsoleDimensions(self.PIPED_WIDTH, size.height)
        return size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._fixed_width = True
        self._width, self._height = new_size

    def render_str(self, text: str, **options: Any) -> Text:
        return _printable_text(super().render_str(text, **options))

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        renderable = rich_cast(renderable)
        if isinstance(renderable, Text):
            renderable = _printable_text(renderable)
        for segment in super().render(renderable, options):
            if segment.control:
                yield segment
                continue
            text = printable(segment.text)
            yield segment if text == segment.text else Segment(text, segment.style)


def _printable_text(text: Text) -> Text:
    plain = printable(text.plain)
    if plain == text.plain:
        return text
    text = text.copy()
    text.plain = plain  # one for one: the spans still fit
    return text

STATUS_STYLE = {"ok": "green", "error": "red", "denied": "yellow", "not_posted": "yellow"}


def short(value: object, limit: int = 120) -> str:
    """One line, at most `limit` characters: for previews of arguments and results."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_start(name: str, arguments: object, depth: int = 0) -> Text:
    """`depth`: a sub-agent's call (1, 2, ...), indented under its parent's `delegate` call."""
    return Text.assemble(("    " * depth, ""), ("→ ", "dim"), (name, "dim"), ("(", "dim"), (short(arguments), "dim"),
                         (")", "dim"))


def tool_end(status: str, content: object, depth: int = 0) -> Text:
    style = STATUS_STYLE.get(status, "white")
    return Text.assemble(("    " * depth + "  ← ", style), (status, style), " ", (short(content), "dim"))


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
