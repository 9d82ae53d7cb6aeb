"""Reading logs safely: line iterators that never hold more than a block and one bounded line in memory,
rotated siblings (`x.log.1`, `x.log.2.gz`, `x.log-20240501`), bytes that are not UTF-8, and timestamps.

Everything here blocks: tools call it through `asyncio.to_thread`."""

from __future__ import annotations

import asyncio
import gzip
import os
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import BinaryIO, TypeVar
from zoneinfo import ZoneInfo

from pydantic import Field

import bot.redact as redaction
from bot.engine.errors import ToolDenied, ToolFailed
from bot.engine.spec import ToolSettings
from bot.redact import printable
from bot.tools.patterns import UserPattern
from bot.tools.sandbox import in_roots, open_allowed

BLOCK = 64 * 1024
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LineFilter:
    """Which lines to keep: `line(text)` decides; `block(raw)` may say early that no line of a whole block
    can match (a plain substring or regex searched over the block), so big files are scanned fast."""

    line: Callable[[str], bool]
    block: BlockTestStr | None = None

    def block_test(self) -> Callable[[bytes], bool] | None:
        test = self.block
        if test is None:
            return None
        return lambda raw: test(raw.decode("utf-8", errors="replace"))


BlockTestStr = Callable[[str], bool]
EVERYTHING = LineFilter(lambda _line: True)


def line_filter(contains: str | None, pattern: UserPattern | None = None) -> LineFilter:
    if pattern is not None:
        return LineFilter(pattern.search_line, pattern.search_block if pattern.has_block_test else None)
    if contains:
        return LineFilter(lambda t: contains in t, lambda t: contains in t)
    return EVERYTHING


@dataclass(frozen=True, slots=True)
class ScanLimits:
    max_line_bytes: int = 4096
    max_scan_bytes: int = 256 * 1024 * 1024
    stop: threading.Event | None = None  # set when the caller gave up: the scan ends at its next block
    redact: Callable[[str], str] = str  # applied to a long line before it is cut

    @property
    def keep_bytes(self) -> int:
        """How much of a long line the iterators keep: the shown part and a LOOKAHEAD to redact with."""
        return self.max_line_bytes + redaction.LOOKAHEAD

    def stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()


async def scan_in_thread(fn: Callable[[ScanLimits], T], limits: ScanLimits) -> T:
    """Run a blocking scan in a worker thread. When the awaiting task is cancelled (the tool timed out, the
    turn was stopped) the scan stops at its next block: no thread keeps reading after the call is over."""
    stop = threading.Event()
    try:
        return await asyncio.to_thread(fn, replace(limits, stop=stop))
    finally:
        stop.set()


@dataclass
class FileLines:
    path: Path
    lines: list[str] = field(default_factory=lambda: list[str]())
    note: str = ""


def clean_line(raw: bytes, limit: int, cut: bool = False, redact: Callable[[str], str] = str) -> str:
    """A line as text, control characters shown as U+FFFD. A line over `limit` bytes is cut there, but
    redacted first, with the LOOKAHEAD the iterators keep beyond the limit (see `ScanLimits.keep_bytes`)."""
    raw = raw.rstrip(b"\r")
    text = printable(raw.decode("utf-8", errors="replace"), one_line=True)
    if cut or len(raw) > limit:
        shown = len(raw[:limit].decode("utf-8", errors="replace"))
        text = redaction.cut(text, shown, redact)[0] + " [line cut]"
    return text


BlockTest = Callable[[bytes], bool]


def reverse_lines(
    fh: BinaryIO, size: int, limits: ScanLimits, may_match: BlockTest | None = None
) -> Iterator[tuple[bytes, bool]]:
    """Yield (line, was_cut) from the end of the file backwards. Reads at most `max_scan_bytes`. Memory:
    one block plus one line prefix of `max_line_bytes` (only the start of an over-long line is kept).
    `may_match(block)` False means no complete line in that block can match: it is not split at all."""
    pos, scanned, pending, cut = size, 0, b"", False
    first = True
    while pos > 0 and scanned < limits.max_scan_bytes and not limits.stopped():
        step = min(BLOCK, pos)
        pos -= step
        scanned += step
        fh.seek(pos)
        data = fh.read(step) + pending
        if first and data.endswith(b"\n"):
            data = data[:-1]  # the file ends with a newline: no empty last line
        first = False
        nl = data.find(b"\n")
        if nl >= 0 and may_match is not None and not may_match(data[nl + 1 :]):
            pending, cut = data[:nl], False
        else:
            pieces = data.split(b"\n")
            pending = pieces[0]
            for line in reversed(pieces[1:]):
                yield line[: limits.keep_bytes], cut or len(line) > limits.keep_bytes
                cut = False
        if len(pending) > limits.keep_bytes:
            pending, cut = pending[: limits.keep_bytes], True
    if pos == 0 and (pending or not first):
        yield pending, cut


def forward_lines(
    fh: BinaryIO,
    limits: ScanLimits,
    start: int = 0,
    may_match: BlockTest | None = None,
    skipped: Callable[[bytes], None] | None = None,
) -> Iterator[tuple[bytes, bool]]:
    """Yield (line, was_cut) from `start` on (from the next line start when `start` is inside a line). A line
    longer than `max_line_bytes` is cut. Blocks whose lines cannot match go to `skipped` unsplit."""
    fh.seek(start)
    pending, cut, read, skip_partial = b"", False, 0, start > 0
    while read < limits.max_scan_bytes and not limits.stopped():
        chunk = fh.read(BLOCK)
        if not chunk:
            break
        read += len(chunk)
        data = pending + chunk
        last = data.rfind(b"\n")
        if last < 0:
            pending, cut = data[: limits.keep_bytes], cut or len(data) > limits.keep_bytes
            continue
        complete, pending = data[:last], data[last + 1 :]
        if skip_partial:
            skip_partial, cut = False, False
            nl = complete.find(b"\n")
            if nl < 0:
                pending = pending[: limits.keep_bytes]
                continue
            complete = complete[nl + 1 :]
        if may_match is not None and not may_match(complete):
            if skipped is not None:
                skipped(complete)
        else:
            for line in complete.split(b"\n"):
                yield line[: limits.keep_bytes], cut or len(line) > limits.keep_bytes
                cut = False
        cut = False
        if len(pending) > limits.keep_bytes:
            pending, cut = pending[: limits.keep_bytes], True
    else:
        return
    if pending and not skip_partial:
        yield pending, cut


_NUMBERED = re.compile(r"^\.(\d{1,3})(\.gz)?$")
_DATED = re.compile(r"^[-.](\d{8}|\d{4}-\d{2}-\d{2})(\.gz)?$")


def rotated_siblings(real: Path, roots: Sequence[str], keep: int) -> list[Path]:
    """Older generations of a log, newest first: x.1, x.2.gz, ... then x-YYYYMMDD[.gz] by date. Each one must
    itself resolve inside the roots (a rotated name that is a symlink out is skipped)."""
    try:
        names = os.listdir(real.parent)
    except OSError:
        return []
    numbered: list[tuple[int, str]] = []
    dated: list[str] = []
    for name in names:
        if not name.startswith(real.name) or name == real.name:
            continue
        suffix = name[len(real.name) :]
        if m := _NUMBERED.match(suffix):
            numbered.append((int(m.group(1)), name))
        elif _DATED.match(suffix):
            dated.append(name)
    ordered = [n for _, n in sorted(numbered)] + sorted(dated, reverse=True)
    out: list[Path] = []
    for name in ordered:
        candidate = real.parent / name
        if in_roots(os.path.realpath(candidate), roots) and not candidate.is_symlink():
            out.append(candidate)
    return out[:keep]


def open_log(real: Path, roots: Sequence[str]) -> tuple[BinaryIO, int, bool]:
    """Open a checked path; returns (binary file, size on disk, is gzip)."""
    fd = open_allowed(real, roots)
    fh = os.fdopen(fd, "rb")
    size = os.fstat(fd).st_size
    if real.name.endswith(".gz"):
        return gzip.GzipFile(fileobj=fh, mode="rb"), size, True  # type: ignore[return-value]
    return fh, size, False


def tail_file(real: Path, roots: Sequence[str], want: int, match: LineFilter, limits: ScanLimits) -> FileLines:
    """The last `want` lines of one file that satisfy `match`, oldest first."""
    fh, size, gz = open_log(real, roots)
    out = FileLines(real)
    with fh:
        if gz:
            return _tail_gz(fh, out, want, match, limits)
        for raw, cut in reverse_lines(fh, size, limits, match.block_test()):
            text = clean_line(raw, limits.max_line_bytes, cut, limits.redact)
            if match.line(text):
                out.lines.append(text)
                if len(out.lines) >= want:
                    break
        else:
            if size > limits.max_scan_bytes:
                out.note = f"only the last {limits.max_scan_bytes} of {size} bytes were searched"
    out.lines.reverse()
    return out


def _tail_gz(fh: BinaryIO, out: FileLines, want: int, match: LineFilter, limits: ScanLimits) -> FileLines:
    kept: deque[str] = deque(maxlen=want)
    try:
        for raw, cut in forward_lines(fh, limits, 0, match.block_test()):
            text = clean_line(raw, limits.max_line_bytes, cut, limits.redact)
            if match.line(text):
                kept.append(text)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        out.note = f"the compressed file is damaged ({exc}); showing what could be read"
    out.lines = list(kept)
    return out


def tail_logs(
    real: Path, roots: Sequence[str], want: int, match: LineFilter, limits: ScanLimits, rotated: int
) -> list[FileLines]:
    """Tail a log and, while lines are still missing, its rotated predecessors. Oldest file first."""
    parts = [tail_file(real, roots, want, match, limits)]
    missing = want - len(parts[0].lines)
    for older in rotated_siblings(real, roots, rotated) if missing > 0 else []:
        try:
            part = tail_file(older, roots, missing, match, limits)
        except (ToolDenied, ToolFailed):
            continue
        parts.append(part)
        missing -= len(part.lines)
        if missing <= 0:
            break
    parts.reverse()
    return parts


# --- timestamps -------------------------------------------------------------------------------------------
_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), start=1)}
_NGINX = re.compile(r"(\d{4})/(\d{2})/(\d{2}) (\d{2}):(\d{2}):(\d{2})")
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,]\d+)?(Z|[+-]\d{2}:?\d{2})?")
_CLF = re.compile(r"\[(\d{2})/([A-Z][a-z]{2})/(\d{4}):(\d{2}):(\d{2}):(\d{2}) ([+-]\d{4})\]")
_SYSLOG = re.compile(r"^([A-Z][a-z]{2}) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2})")
_DURATION = re.compile(
    r"^(\d+)\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?|d|days?|w|weeks?)(\s+ago)?$"
)
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _offset(text: str) -> timedelta:
    if text == "Z":
        return timedelta(0)
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))


def line_time(line: str, tz: ZoneInfo, now: datetime) -> datetime | None:
    """The timestamp a log line starts with (nginx error, ISO 8601, common/combined access log, syslog)."""
    head = line[:160]
    try:
        if m := _NGINX.match(head) or _ISO.match(head):
            y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
            zone = m.groups()[6] if len(m.groups()) > 6 else None
            if zone:
                return datetime(y, mo, d, h, mi, s, tzinfo=timezone(_offset(zone)))
            return datetime(y, mo, d, h, mi, s, tzinfo=tz)
        if m := _CLF.search(head):
            d, mon, y, h, mi, s, zone = m.groups()
            return datetime(
                int(y), _MONTHS[mon], int(d), int(h), int(mi), int(s), tzinfo=timezone(_offset(zone))
            )
        if (m := _SYSLOG.match(head)) and m.group(1) in _MONTHS:
            stamp = datetime(
                now.year,
                _MONTHS[m.group(1)],
                int(m.group(2)),
                int(m.group(3)),
                int(m.group(4)),
                int(m.group(5)),
                tzinfo=tz,
            )
            return stamp.replace(year=now.year - 1) if stamp - now > timedelta(days=1) else stamp
    except (ValueError, KeyError):
        return None
    return None


def parse_since(text: str, now: datetime, tz: ZoneInfo) -> datetime:
    """'15m', '2 hours ago', '1d', or a date/time like '2024-05-01 12:00' (in the agent's timezone)."""
    value = text.strip().lower()
    if m := _DURATION.match(value):
        return now - timedelta(seconds=int(m.group(1)) * _UNIT[m.group(2)[0]])
    try:
        stamp = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ToolFailed(
            f"since={text!r} is neither a duration like '15m', '2h', '1d' nor a date/time like "
            "'2024-05-01 12:00'"
        ) from None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=tz)


# --- settings and output shared by tail_log and grep_log --------------------------------------------------
class LogToolSettings(ToolSettings):
    roots: tuple[str, ...] = ()
    max_lines: int = Field(default=1000, ge=1, le=20_000)
    rotated: int = Field(default=5, ge=0, le=50)
    max_line_bytes: int = Field(default=4096, ge=80, le=1_000_000)
    max_scan_bytes: int = Field(default=512 * 1024 * 1024, ge=1024)
    max_output_chars: int = Field(default=12_000, ge=200, le=1_000_000)

    def limits(self, redact: Callable[[str], str] = str) -> ScanLimits:
        return ScanLimits(self.max_line_bytes, self.max_scan_bytes, redact=redact)

    def folders(self) -> tuple[str, ...]:
        return self.roots


def render(parts: Sequence[FileLines], budget: int, empty: str) -> str:
    """Files oldest first, each under a header; when over `budget` characters the OLDEST lines go first,
    since the newest are what a tail is for."""
    total = sum(len(p.lines) for p in parts)
    if total == 0:
        notes = "; ".join(f"{p.path}: {p.note}" for p in parts if p.note)
        return empty + (f" ({notes})" if notes else "")
    used, kept_count = 0, 0
    keep: list[list[str]] = [[] for _ in parts]
    for i in range(len(parts) - 1, -1, -1):
        for line in reversed(parts[i].lines):
            if used + len(line) + 1 > budget:
                break
            used += len(line) + 1
            kept_count += 1
            keep[i].append(line)
        else:
            continue
        break
    dropped = total - kept_count
    out: list[str] = []
    if dropped:
        out.append(f"[{dropped} older lines are not shown, to stay within {budget} characters]")
    for part, lines in zip(parts, keep, strict=True):
        if not lines and not part.note:
            continue
        out.append(f"==> {part.path} <==" + (f" ({part.note})" if part.note else ""))
        out.extend(reversed(lines))
    return "\n".join(out)
