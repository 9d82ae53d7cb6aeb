"""Files people attach to a message (a log, a snippet, a screenshot), turned into what the model gets.
Platform-free: the chat side fetches (bot/chat/core/attachments.py), the terminal reads a path; both hand
over an `AttachmentSource`, read once per turn here.

Decided by the bytes, never by the name or the declared type: images (PNG, JPEG, GIF, WebP magic) become
image parts when the profile says `vision: true`; gzip is inflated with its output capped (a bomb stops at
the cap); the rest is decoded as text (BOM, UTF-8, UTF-16, else replacement characters) unless NUL or control
bytes say it is binary. Text is redacted whole, then given whole when small, else its head and tail with a
note of what was cut (`read_attachment` reads the rest). A file that cannot be read is one sentence for the
model and the user; the turn goes on. docs/attachments.md."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from bot.engine.context.tokens import default_window
from bot.engine.guard import neutralise, untrusted
from bot.engine.messages import ImagePart, Message
from bot.engine.spec.profiles import AgentProfile
from bot.engine.spec.toolsettings import ToolSettings
from bot.redact import printable

Given = Literal["text", "text-cut", "image", "image-not-shown", "not-read"]
IMAGE_TYPES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
OTHER_BINARY: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "a PDF"), (b"PK\x03\x04", "a ZIP archive (or an Office document)"), (b"\x7fELF", "a program"),
    (b"BZh", "a bzip2 archive"), (b"\xfd7zXZ\x00", "an xz archive"), (b"\x28\xb5\x2f\xfd", "a zstd archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
)
GZIP_MAGIC = b"\x1f\x8b"
READ_TOOL = "read_attachment"  # bot/tools/attachments.py
CHARS_PER_TOKEN = 3  # conservative for logs (numbers, punctuation): the budget is counted in characters


@dataclass(frozen=True, slots=True)
class AttachmentLimits:
    max_files: int = 10  # per message; the rest are named as not read
    max_bytes: int = 25 << 20  # fetched or read, per file: a longer download is stopped (while streaming)
    max_inflated_bytes: int = 50 << 20  # what a gzip file may inflate to: the rest is not read
    max_image_bytes: int = 5 << 20  # an image sent to the model
    max_chars: int = 40_000  # shown of one text file in the message
    window_share: float = 0.3  # all files' text together: at most this share of the context window
    fetch_seconds: float = 30.0  # per file


@dataclass(frozen=True, slots=True)
class Fetched:
    """What reading one source came to: its bytes, or one clause saying why not ("the link has expired")."""

    data: bytes | None
    problem: str | None = None
    truncated: bool = False  # the source was longer than the cap: `data` is its first bytes (only for text)


class AttachmentSource(Protocol):
    """One attached file as a platform describes it; `fetch` reads it (at most `max_bytes`; never raises)."""

    @property
    def name(self) -> str: ...
    @property
    def mimetype(self) -> str: ...  # as declared by the platform ("" when unknown): recorded, not trusted
    @property
    def size(self) -> int | None: ...
    @property
    def origin(self) -> str: ...  # where it came from: the chat platform's name or "file" (and its host or path)
    @property
    def key(self) -> str: ...  # what makes two references one file (its URL, its path)

    async def fetch(self, max_bytes: int, seconds: float) -> Fetched: ...


@dataclass(frozen=True, slots=True)
class AttachmentRecord:
    """One `attachments` audit row: what was attached and what the model was given of it."""

    name: str
    mimetype: str  # what the bytes are (image/png, text/plain, application/gzip…), else the declared type
    size: int  # bytes read (before inflating)
    sha256: str  # of the bytes read ("" when nothing was)
    origin: str
    given: Given
    detail: str  # e.g. "lines 1-120 and 9,800-10,000 of 10,000", or why it was not read


@dataclass(frozen=True, slots=True)
class AttachedText:
    """A text file of this turn as `read_attachment` reads it: decoded, redacted, in lines."""

    name: str
    lines: tuple[str, ...]
    note: str = ""  # e.g. "only the first 50 MB of the inflated file were read"


@dataclass(frozen=True)
class TurnFiles:
    """The text files attached to this turn, by name (the scope of `read_attachment`)."""

    texts: dict[str, AttachedText] = field(default_factory=lambda: dict[str, AttachedText]())

    def get(self, name: str) -> AttachedText | None:
        return self.texts.get(name) or next((t for t in self.texts.values() if t.name.lower() == name.lower()),
                                            None)

    def __bool__(self) -> bool:
        return bool(self.texts)


@dataclass(frozen=True)
class Prepared:
    """The user's message with its files: the text the model reads, the images it sees, the audit rows and
    the sentences the user is told (files that could not be read)."""

    message: Message
    files: TurnFiles
    records: tuple[AttachmentRecord, ...]
    problems: tuple[str, ...]

    def answer_note(self) -> str:
        return "\n".join(self.problems)


def safe_name(name: str) -> str:
    """A file name as shown to the model and the user: one line, no controls, no quotes, no spelled-out marker (it
    stands outside a block in "could not read" notes), at most 120 chars."""
    clean = neutralise(printable(name, one_line=True)).replace('"', "'").replace("`", "'").strip() or "attachment"
    return clean if len(clean) <= 120 else clean[:117] + "..."


def human_size(n: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def sniff_image(data: bytes) -> str | None:
    for magic, mime in IMAGE_TYPES:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def inflate(data: bytes, cap: int) -> tuple[bytes, bool]:
    """Gunzip `data` (every member), producing at most `cap` bytes: returns (output, whether it was cut).
    The cap is applied while inflating, so a small bomb never becomes a large buffer. Raises zlib.error."""
    out, left, rest = bytearray(), cap, data
    while rest and left > 0:
        d = zlib.decompressobj(wbits=31)
        out += d.decompress(rest, left)
        left = cap - len(out)
        if d.unconsumed_tail:  # more output waiting than the cap allows
            return bytes(out), True
        if not d.eof:
            out += d.flush()
            return bytes(out[:cap]), len(out) > cap
        rest = d.unused_data
        if rest and not rest.startswith(GZIP_MAGIC):  # trailing garbage after the last member
            break
    return bytes(out), bool(rest) and left <= 0


def decode_text(data: bytes) -> str | None:
    """The bytes as text, or None when they look binary (NULs, or many control bytes). BOMs are honoured,
    BOM-less UTF-16 is recognised by its zero bytes, invalid UTF-8 becomes U+FFFD."""
    if data.startswith(b"\xef\xbb\xbf"):
        text = data[3:].decode("utf-8", "replace")
    elif data.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = data.decode("utf-16", "replace")
    elif (utf16 := _bomless_utf16(data)) is not None:
        text = data.decode(utf16, "replace")
    else:
        sample = data[:65536]
        if sample.count(0) > 0:
            return None
        text = data.decode("utf-8", "replace")
    sample_text = text[:65536]
    if not sample_text:
        return text
    controls = sum(1 for ch in sample_text if ord(ch) < 32 and ch not in "\t\n\r\f\x1b\b")
    replaced = sample_text.count("\ufffd")
    if "\x00" in sample_text or (controls + replaced) / len(sample_text) > 0.1:
        return None
    return printable(text.replace("\r\n", "\n"))


def _bomless_utf16(data: bytes) -> str | None:
    sample = data[:4096]
    if len(sample) < 4:
        return None
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    half = len(sample) // 2
    if odd > 0.4 * half and even < 0.05 * half:
        return "utf-16-le"
    if even > 0.4 * half and odd < 0.05 * half:
        return "utf-16-be"
    return None


def _lines_kept(lines: Sequence[str], budget: int) -> tuple[int, int]:
    """How many lines of the head and of the tail fit `budget` characters (a third head, the rest tail: the
    end of a log is where the failure usually is)."""
    def fit(seq: Sequence[str], room: int) -> int:
        n = 0
        for line in seq:
            room -= len(line) + 1
            if room < 0:
                break
            n += 1
        return n

    head = fit(lines, budget // 3)
    tail = fit(list(reversed(lines[head:])), budget - sum(len(x) + 1 for x in lines[:head]))
    return head, tail


def _clip_line(line: str, limit: int = 2000) -> str:
    return line if len(line) <= limit else line[:limit] + f" [... {len(line) - limit} more characters]"


@dataclass
class _Build:
    vision: bool
    budget: int  # characters left for text files
    redact: Callable[[str], str]
    limits: AttachmentLimits
    blocks: list[str] = field(default_factory=lambda: list[str]())
    images: list[ImagePart] = field(default_factory=lambda: list[ImagePart]())
    records: list[AttachmentRecord] = field(default_factory=lambda: list[AttachmentRecord]())
    problems: list[str] = field(default_factory=lambda: list[str]())
    texts: dict[str, AttachedText] = field(default_factory=lambda: dict[str, AttachedText]())

    def not_read(self, src: AttachmentSource, name: str, why: str, data: bytes = b"", mime: str = "") -> None:
        sentence = f'I could not read the attached file "{name}": {why}.'
        self.problems.append(sentence)
        self.blocks.append(f"[yokebot] {sentence}")
        self.records.append(AttachmentRecord(name, mime or src.mimetype, len(data),
                                             hashlib.sha256(data).hexdigest() if data else "", src.origin,
                                             "not-read", why))


async def prepare(text: str, sources: Sequence[AttachmentSource], *, vision: bool, window_tokens: int,
                  redact: Callable[[str], str], limits: AttachmentLimits | None = None) -> Prepared:
    """Fetch each distinct source once (in parallel) and build the user message: `text`, then one block per
    file, in the order attached."""
    limits = limits or AttachmentLimits()
    unique: dict[str, AttachmentSource] = {}
    for src in sources:
        unique.setdefault(src.key, src)
    chosen = list(unique.values())
    kept, dropped = chosen[: limits.max_files], chosen[limits.max_files:]
    fetched = await asyncio.gather(*(src.fetch(limits.max_bytes, limits.fetch_seconds) for src in kept))
    b = _Build(vision, min(limits.max_chars * len(kept), int(window_tokens * limits.window_share * CHARS_PER_TOKEN)),
               redact, limits)
    texts_left = sum(1 for f in fetched if f.data is not None and sniff_image(f.data) is None)
    used: set[str] = set()
    for src, got in zip(kept, fetched, strict=True):
        name = _unique(safe_name(src.name), used)
        if got.data is None:
            b.not_read(src, name, got.problem or "it could not be downloaded")
            continue
        if sniff_image(got.data) is None:
            share = b.budget // max(1, texts_left)
            texts_left -= 1
            b.budget -= await asyncio.to_thread(_text_file, b, src, name, got, min(share, limits.max_chars))
        else:
            _image_file(b, src, name, got)
    per_message = f"only {limits.max_files} files are" if limits.max_files != 1 else "only 1 file is"
    for src in dropped:
        b.not_read(src, safe_name(src.name), f"{per_message} read per message")
    body = "\n\n".join([text, *b.blocks]) if b.blocks else text
    return Prepared(Message(role="user", content=body, images=tuple(b.images)), TurnFiles(b.texts),
                    tuple(b.records), tuple(b.problems))


def _unique(name: str, used: set[str]) -> str:
    base, n = name, 2
    while name.lower() in used:
        name, n = f"{base} ({n})", n + 1
    used.add(name.lower())
    return name


def _image_file(b: _Build, src: AttachmentSource, name: str, got: Fetched) -> None:
    data = got.data or b""
    mime = sniff_image(data) or "image"
    digest = hashlib.sha256(data).hexdigest()
    if got.truncated or len(data) > b.limits.max_image_bytes:
        b.not_read(src, name, f"the image is larger than {human_size(b.limits.max_image_bytes)}", data, mime)
        return
    about = f"{mime}, {human_size(len(data))}"
    if b.vision:
        b.images.append(ImagePart(mime, base64.b64encode(data).decode("ascii"), digest, name))
        b.blocks.append(f'[attached image "{name}" ({about}): it is included with this message]')
        b.records.append(AttachmentRecord(name, mime, len(data), digest, src.origin, "image", "sent as an image"))
        return
    b.blocks.append(f'[attached image "{name}" ({about}): this agent\'s model cannot see images, so only its '
                    "name is known; say so if the question depends on it]")
    b.records.append(AttachmentRecord(name, mime, len(data), digest, src.origin, "image-not-shown",
                                      "the profile does not set vision: true"))


def _text_file(b: _Build, src: AttachmentSource, name: str, got: Fetched, share: int) -> int:
    """Decode, redact and show one text file; returns the characters it used of the budget. Runs in a
    thread: inflating, decoding and redacting megabytes would stop the event loop."""
    raw = got.data or b""
    digest = hashlib.sha256(raw).hexdigest()
    data, kind, notes = raw, "text/plain", list[str]()
    if got.truncated:
        notes.append(f"only its first {human_size(len(raw))} were downloaded")
    if raw.startswith(GZIP_MAGIC):
        try:
            data, cut = inflate(raw, b.limits.max_inflated_bytes)
        except zlib.error:
            b.not_read(src, name, "it is a damaged gzip file", raw, "application/gzip")
            return 0
        kind = "application/gzip"
        if cut:
            notes.append(f"it inflates to more than {human_size(b.limits.max_inflated_bytes)}; only that much "
                         "was read")
    for magic, what in OTHER_BINARY:
        if data.startswith(magic):
            b.not_read(src, name, f"it is {what}; only text files and images are read", raw, kind)
            return 0
    text = decode_text(data)
    if text is None:
        b.not_read(src, name, "it is a binary file, not text", raw, kind)
        return 0
    lines = tuple(b.redact(text).split("\n"))
    if lines and (lines[-1] == "" or (notes and len(lines) > 1)):  # a line cut by a cap is dropped
        lines = lines[:-1]
    note = "; ".join(notes)
    b.texts[name] = AttachedText(name, lines, note)
    shown, detail, given = _show(name, lines, share)
    header = f'--- attached file "{name}" ({human_size(len(raw))}, {len(lines):,} lines{", " + note if note else ""})'
    b.blocks.append(untrusted(f"{header}: {detail} ---\n{shown}\n--- end of \"{name}\" ---", f"file {name}"))
    b.records.append(AttachmentRecord(name, kind, len(raw), digest, src.origin, given,
                                      detail + (f"; {note}" if note else "")))
    return len(shown)


def _show(name: str, lines: Sequence[str], budget: int) -> tuple[str, str, Given]:
    clipped = [_clip_line(line) for line in lines]
    total = sum(len(x) + 1 for x in clipped)
    if total <= budget:
        return "\n".join(clipped), "shown whole", "text"
    head, tail = _lines_kept(clipped, budget)
    first_cut, last_cut = head + 1, len(lines) - tail
    gap = (f"[... lines {first_cut:,}-{last_cut:,} not shown; read_attachment(name=\"{name}\", "
           f"offset={first_cut}) or a pattern reads them ...]")
    shown = "\n".join([*clipped[:head], gap, *clipped[len(lines) - tail:]])
    detail = f"lines 1-{head:,} and {last_cut + 1:,}-{len(lines):,} shown" if tail else f"lines 1-{head:,} shown"
    return shown, detail, "text-cut"


@dataclass(frozen=True)
class ForTurn:
    """A turn's files as the service uses them: the prepared message, and the profile for this turn (with
    `read_attachment` when a text file was attached, so the model can read what was cut)."""

    prepared: Prepared
    profile: AgentProfile


async def for_turn(text: str, sources: Sequence[AttachmentSource], profile: AgentProfile, default_model: str,
                   redact: Callable[[str], str], limits: AttachmentLimits | None = None) -> ForTurn:
    window = profile.context_window or default_window(profile.model or default_model)
    prepared = await prepare(text, sources, vision=profile.vision, window_tokens=window, redact=redact,
                             limits=limits)
    if prepared.files and READ_TOOL not in profile.tools:
        profile = replace(profile, tools={**profile.tools, READ_TOOL: ToolSettings()})
    return ForTurn(prepared, profile)
