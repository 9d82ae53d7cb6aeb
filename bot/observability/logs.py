"""Logging, configured once: human-readable lines by default, JSON lines with YOKEBOT_LOG_FORMAT=json.

Every record logged while a turn runs carries `session_id` and `trace_id` (the turn id, as in
`yokebot trace`), read from the engine's CURRENT_TURN context variable. Secrets are replaced before any
handler writes, by the one redactor (`bot.redact`) that tool output passes through too."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import IO, Any

from bot.config import Settings
from bot.engine.service import CURRENT_TURN
from bot.redact import SecretRedactor, printable

_HANDLER_MARK = "_yokebot_handler"
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "session_id", "trace_id"}


class RedactFilter(logging.Filter):
    """Renders the message (and traceback) once, redacted, so no formatter can re-insert a raw argument."""

    def __init__(self, redact: Callable[[str], str]) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        # a message is one line with no control characters: what it quotes (a model endpoint's error page, a
        # model's reply, a Slack message) can neither forge a log line nor send escape sequences to a terminal
        record.msg = printable(self.redact(record.getMessage()), one_line=True)
        record.args = None
        for key, value in list(vars(record).items()):  # `extra=` fields reach the JSON lines too
            if key not in _STANDARD and isinstance(value, str):
                setattr(record, key, printable(self.redact(value), one_line=True))
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:  # a traceback keeps its lines
            record.exc_text = printable(self.redact(record.exc_text))
        if record.stack_info:
            record.stack_info = printable(self.redact(record.stack_info))
        return True


class TurnFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        turn = CURRENT_TURN.get()
        if not hasattr(record, "session_id"):
            record.session_id = turn.session_id if turn else None
        if not hasattr(record, "trace_id"):
            record.trace_id = turn.turn_id if turn else None
        return True


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(turn)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        sid, tid = getattr(record, "session_id", None), getattr(record, "trace_id", None)
        record.turn = f" [session={sid} trace={tid}]" if sid else ""
        return super().format(record)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "session_id": getattr(record, "session_id", None),
            "trace_id": getattr(record, "trace_id", None),
        }
        extra = {k: v for k, v in vars(record).items() if k not in _STANDARD and k != "turn"}
        for key, value in extra.items():
            entry[key] = value if isinstance(value, str | int | float | bool | None) else repr(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False)


class StderrHandler(logging.StreamHandler[IO[str]]):
    """Writes to whatever sys.stderr is at the time of the record (test runners swap it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr  # under the handler's lock (`handle`)
        super().emit(record)

    def flush(self) -> None:
        self.stream = sys.stderr
        super().flush()


# Start-up lines that say nothing to a yokebot user: (logger prefix, words of the message). discord.py warns of
# voice support (yokebot never joins a voice channel); Bolt warns that `token` is unused next to the `client`
# yokebot gives it (the client carries that token).
NOISE = (("discord.client", "voice will NOT be supported"), ("slack_bolt", "`token` will be unused"))


class NoiseFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not any(record.name.startswith(prefix) and words in str(record.msg) for prefix, words in NOISE)


def make_handler(fmt: str, secrets: Iterable[str], stream: IO[str] | None = None) -> logging.Handler:
    handler: logging.Handler = logging.StreamHandler(stream) if stream is not None else StderrHandler()
    handler.setFormatter(JsonFormatter() if fmt.lower() == "json" else TextFormatter())
    handler.addFilter(NoiseFilter())
    handler.addFilter(TurnFilter())
    handler.addFilter(RedactFilter(SecretRedactor(secrets)))
    setattr(handler, _HANDLER_MARK, True)
    return handler


def configure(level: int | str, fmt: str = "text", secrets: Iterable[str] = (),
              stream: IO[str] | None = None) -> logging.Handler:
    """Install yokebot's one handler on the root logger, replacing the one a previous call installed."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    handler = make_handler(fmt, secrets, stream)
    root.addHandler(handler)
    root.setLevel(level)
    # HTTP client libraries' DEBUG lines are request dumps (headers included): never below WARNING
    for name in ("httpx", "httpcore", "openai", "aiosqlite", "asyncio"):
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
    # Alembic's INFO lines (plugins, "Context impl", each revision's docstring) come at every start; yokebot's
    # own "migrating database from X to Y" says what matters. DEBUG shows them again.
    logging.getLogger("alembic").setLevel(logging.DEBUG if root.level <= logging.DEBUG else logging.WARNING)
    return handler


def redact_also(values: Iterable[str]) -> None:
    """Add secret values to the installed handler's redactor (an MCP server's `${VAR}` values)."""
    for handler in logging.getLogger().handlers:
        if getattr(handler, _HANDLER_MARK, False):
            for f in handler.filters:
                if isinstance(f, RedactFilter) and isinstance(f.redact, SecretRedactor):
                    f.redact.add(values)


def setup_logging(settings: Settings, quiet: bool = False, stream: IO[str] | None = None) -> logging.Handler:
    """From Settings: level YOKEBOT_LOG_LEVEL (WARNING when quiet), format YOKEBOT_LOG_FORMAT, its secrets."""
    level = logging.WARNING if quiet else getattr(logging, settings.log_level.upper(), logging.INFO)
    return configure(level, settings.log_format, settings.secret_values(), stream)
