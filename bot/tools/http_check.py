"""http_check: GET or HEAD a URL on the agent's `allow:` list and report status, latency, a few headers, the
TLS certificate's expiry and issuer, and a short body excerpt (or whether an expected text is present).

The sandbox: the URL must match an allow entry (scheme, host, port, path prefix) with no user info; the host
is resolved once, every address checked (link-local and cloud-metadata addresses always refused, loopback
and private ones only when the list names them), and the connection made to the checked addresses (a
resolver that knows nothing else), so a second DNS answer cannot move it. Redirects are followed only while
they stay on the list; no proxy from the environment is used."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, field_validator
from yarl import URL

from bot.engine.errors import ToolDenied, ToolFailed
from bot.engine.run import ToolContext, tool
from bot.engine.spec import IP, Allowed, ToolSettings, check_allow, check_networks, parse_allowed

if TYPE_CHECKING:
    import aiohttp
    from aiohttp.abc import AbstractResolver

Net = ipaddress.IPv4Network | ipaddress.IPv6Network
METADATA = {ipaddress.ip_address(a) for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254",
                                              "100.100.100.200", "192.0.0.192")}
SHOWN_HEADERS = ("content-type", "content-length", "server", "location", "retry-after", "cache-control")
REDIRECTS = {301, 302, 303, 307, 308}


class HttpCheckSettings(ToolSettings):
    LIST: ClassVar[str] = "http_check allow-list"  # what refusals call the list (runbook pages: their own)

    allow: tuple[str, ...] = ()  # URL prefixes: scheme://host[:port]/path
    networks: tuple[str, ...] = ()  # loopback or private networks (CIDR) allowed hosts may resolve to
    max_body_bytes: int = Field(default=65_536, ge=0, le=10_000_000)
    excerpt_chars: int = Field(default=300, ge=0, le=4000)
    max_redirects: int = Field(default=3, ge=0, le=10)
    request_timeout: float = Field(default=10.0, gt=0, le=300)
    ca_file: str | None = None  # a CA bundle for internal certificates (else the system's)

    @field_validator("allow")
    @classmethod
    def _allow(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return check_allow(value)

    @field_validator("networks")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return check_networks(value)

    def entries(self) -> list[Allowed]:
        return [parse_allowed(e) for e in self.allow]


# --- the checks -----------------------------------------------------------------------------------------
def check_url(text: str, settings: HttpCheckSettings) -> tuple[URL, Allowed]:
    shown = ", ".join(settings.allow) or f"nothing (this agent has no {settings.LIST})"
    try:
        url = URL(text.strip())
    except ValueError:
        raise ToolDenied(f"{text!r} is not a URL", shown) from None
    if url.scheme not in ("http", "https"):
        raise ToolDenied(f"only http and https URLs can be checked, not {url.scheme or 'a relative URL'!r}", shown)
    if url.user is not None or url.password is not None or "@" in (url.raw_authority or ""):
        raise ToolDenied("the URL carries user info (user@host); name the host alone", shown)
    segments = url.raw_path.lower().replace("%2e", ".").split("/")
    if any(s in (".", "..") for s in segments) or any(c in url.raw_path.lower() for c in ("%2f", "%5c", "\\")):
        raise ToolDenied("the URL's path has dot segments or encoded slashes", shown)
    for entry in settings.entries():
        if entry.matches(url):
            return url.with_fragment(None), entry
    raise ToolDenied(f"{url.with_query(None).with_fragment(None)} is not on this agent's {settings.LIST}", shown)


def address_problem(ip: IP, entry: Allowed, networks: list[Net]) -> str | None:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in METADATA:
        return "a cloud metadata address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast or ip.is_unspecified or ip.is_reserved:
        return "not a unicast address"
    if ip.is_global or entry.names(ip) or any(ip.version == n.version and ip in n for n in networks):
        return None
    kind = "a loopback" if ip.is_loopback else "a private"
    return f"{kind} address the allow-list does not name (add its network to networks:)"


async def resolve_checked(url: URL, entry: Allowed, settings: HttpCheckSettings) -> list[str]:
    host, port = url.host or "", url.port or 0
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ToolFailed(f"cannot resolve {host} ({exc.strerror or exc})") from None
        addresses = list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos))
    networks = [ipaddress.ip_network(n, strict=False) for n in settings.networks]
    for ip in addresses:
        problem = address_problem(ip, entry, networks)
        if problem is not None:
            raise ToolDenied(f"{host} resolves to {ip}, {problem}", ", ".join(settings.allow))
    return [str(ip) for ip in addresses]


def pinned_resolver(host: str, addresses: list[str]) -> AbstractResolver:
    """A resolver that answers only for the checked host, with the checked addresses."""
    from aiohttp.abc import AbstractResolver, ResolveResult  # imported when a check runs, not at start-up

    checked = host

    class PinnedResolver(AbstractResolver):
        async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
                          ) -> list[ResolveResult]:
            if host != checked:
                raise OSError(f"{host} was not checked")
            return [ResolveResult(hostname=host, host=a, port=port, proto=0, flags=socket.AI_NUMERICHOST,
                                  family=socket.AF_INET6 if ":" in a else socket.AF_INET) for a in addresses]

        async def close(self) -> None:
            return None

    return PinnedResolver()


# --- one request ----------------------------------------------------------------------------------------
@dataclass
class Hop:
    url: URL
    status: int
    reason: str
    headers: dict[str, str]
    latency_ms: float
    cert: dict[str, Any] | None
    body: bytes = b""
    cut: bool = False
    slow: bool = False


async def fetch(url: URL, method: str, addresses: list[str], settings: HttpCheckSettings, deadline: float) -> Hop:
    import aiohttp

    context = ssl.create_default_context(cafile=settings.ca_file) if url.scheme == "https" else None
    connector = aiohttp.TCPConnector(resolver=pinned_resolver(url.host or "", addresses), use_dns_cache=False,
                                     ssl=context if context is not None else True, force_close=True)
    started = time.perf_counter()
    async with aiohttp.ClientSession(connector=connector, trust_env=False, auto_decompress=True) as http:
        try:
            async with asyncio.timeout_at(deadline):
                resp = await http.request(method, url, allow_redirects=False, headers={"User-Agent": "yokebot"})
        except TimeoutError:
            raise ToolFailed(f"{url} did not answer within {settings.request_timeout:g} s") from None
        except aiohttp.ClientConnectorCertificateError as exc:
            raise ToolFailed(f"the TLS certificate of {url.host} was not accepted: {exc.certificate_error}") from None
        except aiohttp.ClientError as exc:
            raise ToolFailed(f"{method} {url} failed: {type(exc).__name__}: {exc}") from None
        async with resp:
            hop = Hop(url, resp.status, resp.reason or "", {k.lower(): v for k, v in resp.headers.items()},
                      (time.perf_counter() - started) * 1000, None)
            if method != "HEAD":
                await _read_body(resp, hop, settings.max_body_bytes, deadline)
    if context is not None:
        hop.cert = await peer_cert(url, addresses[0], context, deadline)
    return hop


async def peer_cert(url: URL, address: str, context: ssl.SSLContext, deadline: float) -> dict[str, Any] | None:
    """The server's certificate, from a handshake of its own with the checked address, verified as the
    request was (aiohttp releases a connection before its caller can look at it when the body is short)."""
    try:
        async with asyncio.timeout_at(deadline):
            _, writer = await asyncio.open_connection(address, url.port, ssl=context, server_hostname=url.host)
    except (OSError, TimeoutError):
        return None
    try:
        return writer.get_extra_info("peercert")
    finally:
        writer.close()


async def _read_body(resp: aiohttp.ClientResponse, hop: Hop, limit: int, deadline: float) -> None:
    import aiohttp

    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout_at(deadline):
            while size <= limit:
                chunk = await resp.content.read(min(65_536, limit + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
    except TimeoutError:
        hop.slow = True
    except aiohttp.ClientError:
        hop.slow = True  # the connection broke off: report what came
    body = b"".join(chunks)
    hop.cut = len(body) > limit
    hop.body = body[:limit]


# --- the report -----------------------------------------------------------------------------------------
def _cert_line(cert: dict[str, Any], now: datetime) -> str:
    def name(field: Any) -> str:
        parts = [f"{k}={v}" for rdn in field or () for k, v in rdn if k in ("commonName", "organizationName")]
        return ", ".join(parts) or "?"

    expires = datetime.fromtimestamp(ssl.cert_time_to_seconds(cert["notAfter"]), UTC)
    days = (expires - now).days
    when = f"in {days} days" if days >= 0 else f"{-days} days ago"
    return f"TLS: certificate for {name(cert.get('subject'))}, issued by {name(cert.get('issuer'))}, expires " \
           f"{expires:%Y-%m-%d %H:%M} UTC ({when})"


def excerpt(body: bytes, chars: int) -> str:
    text = body.decode("utf-8", "replace")
    text = "".join(c if c.isprintable() or c in " \n\t" else "\ufffd" for c in text)
    return " ".join(text.split())[:chars]


def report(method: str, hops: list[Hop], expect: str | None, settings: HttpCheckSettings, note: str = "") -> str:
    last = hops[-1]
    lines = [f"{method} {last.url} -> {last.status} {last.reason} in {last.latency_ms:.0f} ms"]
    lines += [f"redirect: {h.url} -> {h.status} {h.headers.get('location', '')}" for h in hops[:-1]]
    if note:
        lines.append(note)
    shown = [f"{k}: {last.headers[k]}" for k in SHOWN_HEADERS if k in last.headers]
    if shown:
        lines.append("headers: " + "; ".join(v[:200] for v in shown))
    if last.cert:
        lines.append(_cert_line(last.cert, datetime.now(UTC)))
    if method == "HEAD":
        return "\n".join(lines)
    size = f"{len(last.body):,} bytes" + (f" (cut at max_body_bytes {settings.max_body_bytes:,})" if last.cut else "")
    if last.slow:
        size += f" (the body did not finish within {settings.request_timeout:g} s)"
    lines.append(f"body: {size}")
    if expect is not None:
        found = expect in last.body.decode("utf-8", "replace")
        lines.append(f"expected text {expect!r}: {'present' if found else 'NOT present'}"
                     + ("" if found or not (last.cut or last.slow) else " in the part that was read"))
    elif settings.excerpt_chars and last.body:
        lines.append(f"body starts: {excerpt(last.body, settings.excerpt_chars)}")
    return "\n".join(lines)


@tool(
    "http_check",
    "Check an HTTP(S) endpoint on this agent's allow-list (a health check, a status page, an API): GET or "
    "HEAD it and report the status, latency, a few headers, the TLS certificate's issuer and expiry, and the "
    "start of the body, or whether `expect` (a text) is in it. Use it to see whether a service answers from "
    "here and how fast; redirects are followed only while they stay on the allow-list.",
    settings=HttpCheckSettings,
    timeout=60.0,
)
async def http_check(
    ctx: ToolContext[HttpCheckSettings],
    url: str = Field(min_length=1, max_length=2000),
    method: str = Field(default="GET", pattern="^(GET|HEAD)$"),
    expect: str | None = Field(default=None, max_length=500),
) -> str:
    hops, note = await follow(url, method, ctx.settings)
    return report(method, hops, expect, ctx.settings, note)


async def follow(url: str, method: str, settings: HttpCheckSettings) -> tuple[list[Hop], str]:
    """GET or HEAD `url` under the sandbox above, following redirects while they stay on the list: the hops,
    and a note when a redirect was not followed (too many). Raises ToolDenied (off the list, a refused address,
    a redirect off the list) or ToolFailed (no answer). Runbook pages are fetched through it too
    (bot/alerts/knowledge.py)."""
    target, entry = check_url(url, settings)
    deadline = asyncio.get_running_loop().time() + settings.request_timeout
    hops: list[Hop] = []
    while True:
        addresses = await resolve_checked(target, entry, settings)
        hop = await fetch(target, method, addresses, settings, deadline)
        hops.append(hop)
        location = hop.headers.get("location")
        if hop.status not in REDIRECTS or not location:
            return hops, ""
        following = target.join(URL(location))
        try:
            target, entry = check_url(str(following), settings)
        except ToolDenied as exc:
            raise ToolDenied(f"{hop.url} redirects ({hop.status}) to {following}, which was not followed: "
                             f"{exc.reason}", exc.allowed) from None
        if len(hops) > settings.max_redirects:
            return hops, f"[redirect to {following} not followed: more than {settings.max_redirects} redirects]"
        method = "GET" if hop.status == 303 else method
