"""Fetching the files attached to a chat message, from the platform's own file servers only.

A reference (`FileRef`: name, type, size, URL, platform) is parsed from the event by the platform's parser
and stored in the inbox row (so a turn run again after a restart fetches it again). `RemoteFile` is the
engine's `AttachmentSource` for it: fetched once per turn, only from the scheme, host and port of
its API URL and its documented file hosts (each platform's manifest names them); redirects are followed only
within that set; a platform that needs its token for files (Slack) passes it (`Authorization: Bearer`), nobody
else does; the size cap is applied while
streaming and the whole fetch has a time cap. A sign-in page (text/html) is "expired or not shared"."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import urljoin, urlsplit

import aiohttp

from bot.engine.context import Fetched

log = logging.getLogger(__name__)

MAX_REDIRECTS = 5
NOT_SHARED = "the link has expired or the file is not shared with the bot"

Origin = tuple[str, str, int]  # scheme, host, port


def origin_of(url: str) -> Origin | None:
    try:
        parts = urlsplit(url)
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None:
        return None
    return parts.scheme, parts.hostname.lower(), port


@dataclass(frozen=True, slots=True)
class FileRef:
    """An attached file as its event describes it: plain data (stored in the inbox row's `reply`)."""

    platform: str
    name: str
    url: str
    mimetype: str = ""
    size: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"platform": self.platform, "name": self.name, "url": self.url, "mimetype": self.mimetype,
                "size": self.size}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FileRef:
        size = d.get("size")
        return cls(str(d.get("platform") or ""), str(d.get("name") or "attachment"), str(d.get("url") or ""),
                   str(d.get("mimetype") or ""), int(size) if isinstance(size, int) else None)


def refs_from(target: Mapping[str, Any]) -> tuple[FileRef, ...]:
    """The file refs an inbox row's reply target holds (`files`), for `rebuild`."""
    files: Iterable[object] = target.get("files") or ()
    return tuple(FileRef.from_dict(cast(Mapping[str, Any], d)) for d in files if isinstance(d, Mapping))


class FileFetcher:
    """Fetches one platform's files from `urls` (its file hosts and its API URL; None: not set): only from
    their origins."""

    def __init__(self, platform: str, urls: Iterable[str | None], token: str | None = None) -> None:
        self.platform, self.token = platform, token
        found = (origin_of(u) for u in urls if u)
        self.hosts: frozenset[Origin] = frozenset(o for o in found if o is not None)

    def allowed(self, url: str) -> bool:
        return origin_of(url) in self.hosts

    def sources(self, refs: Iterable[FileRef]) -> tuple[RemoteFile, ...]:
        return tuple(RemoteFile(r, self) for r in refs)

    async def fetch(self, url: str, max_bytes: int, seconds: float) -> Fetched:
        try:
            async with asyncio.timeout(seconds), aiohttp.ClientSession() as http:
                return await self._get(http, url, max_bytes)
        except TimeoutError:
            return Fetched(None, f"the download took longer than {seconds:g} seconds")
        except (aiohttp.ClientError, OSError) as exc:
            log.warning("attachment: %s fetch failed: %s", self.platform, type(exc).__name__)
            return Fetched(None, f"{self.platform.capitalize()}'s file server could not be reached")

    async def _get(self, http: aiohttp.ClientSession, url: str, max_bytes: int) -> Fetched:
        for _ in range(MAX_REDIRECTS + 1):
            if not self.allowed(url):
                return Fetched(None, f"its link is not on {self.platform.capitalize()}'s file servers, so it "
                                     "was not fetched")
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            async with http.get(url, headers=headers, allow_redirects=False) as resp:
                if resp.status in (301, 302, 303, 307, 308):
                    target = urljoin(url, resp.headers.get("Location", ""))
                    if not self.allowed(target):  # a sign-in page, or anywhere else: never followed
                        return Fetched(None, NOT_SHARED)
                    url = target
                    continue
                return await self._body(resp, max_bytes)
        return Fetched(None, "its link redirects too many times")

    @staticmethod
    async def _body(resp: aiohttp.ClientResponse, max_bytes: int) -> Fetched:
        if resp.status in (401, 403):
            return Fetched(None, f"the bot is not allowed to read it ({resp.status})")
        if resp.status in (404, 410):
            return Fetched(None, f"{NOT_SHARED} ({resp.status})")
        if resp.status != 200:
            return Fetched(None, f"the file server answered {resp.status}")
        if resp.content_type == "text/html":  # a file fetch answered by a page: Slack's sign-in page
            return Fetched(None, NOT_SHARED)
        data = bytearray()
        async for chunk in resp.content.iter_chunked(65536):
            data += chunk
            if len(data) > max_bytes:  # stop downloading: the cap holds while streaming
                return Fetched(bytes(data[:max_bytes]), None, truncated=True)
        return Fetched(bytes(data))


@dataclass(frozen=True, slots=True)
class RemoteFile:
    """`AttachmentSource` for a chat file (bot/engine/context/attachments.py)."""

    ref: FileRef
    fetcher: FileFetcher

    @property
    def name(self) -> str:
        return self.ref.name

    @property
    def mimetype(self) -> str:
        return self.ref.mimetype

    @property
    def size(self) -> int | None:
        return self.ref.size

    @property
    def origin(self) -> str:
        found = origin_of(self.ref.url)
        return f"{self.ref.platform} {found[1]}" if found else self.ref.platform

    @property
    def key(self) -> str:
        return self.ref.url

    async def fetch(self, max_bytes: int, seconds: float) -> Fetched:
        if self.ref.size is not None and self.ref.size > max_bytes and not _text_like(self.ref):
            return Fetched(None, f"it is larger than the {max_bytes >> 20} MB that are read")
        return await self.fetcher.fetch(self.ref.url, max_bytes, seconds)


def _text_like(ref: FileRef) -> bool:
    """A big text file is still worth its first part; a big image or archive is not worth downloading."""
    return not ref.mimetype.startswith(("image/", "video/", "audio/"))


def refs_json(refs: Sequence[FileRef]) -> list[dict[str, Any]]:
    return [r.to_dict() for r in refs]


@dataclass(frozen=True, slots=True)
class LocalFile:
    """`AttachmentSource` for a file named in the terminal (`ask --file`, `/file` in `chat`): the user's own
    file, read with the same caps (in a thread: no blocking in the event loop)."""

    path: str

    @property
    def name(self) -> str:
        return Path(self.path).name or self.path

    @property
    def mimetype(self) -> str:
        return ""

    @property
    def size(self) -> int | None:
        return None

    @property
    def origin(self) -> str:
        return f"file {self.resolved}"

    @property
    def key(self) -> str:
        return str(self.resolved)

    @property
    def resolved(self) -> Path:
        return Path(self.path).expanduser().resolve()

    async def fetch(self, max_bytes: int, seconds: float) -> Fetched:
        return await asyncio.to_thread(self._read, max_bytes)

    def _read(self, max_bytes: int) -> Fetched:
        real = self.resolved
        try:
            if not real.is_file():
                return Fetched(None, "there is no such file" if not real.exists() else "it is not a regular file")
            with real.open("rb") as fh:
                data = fh.read(max_bytes + 1)
        except OSError as exc:
            return Fetched(None, f"it cannot be opened ({exc.strerror or type(exc).__name__})")
        if len(data) > max_bytes:
            return Fetched(data[:max_bytes], None, truncated=True)
        return Fetched(data)
