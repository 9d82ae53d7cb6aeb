"""URL prefixes an agent allows (http_check's `allow:`, runbooks' `fetch: {allow: ...}`): scheme, host, port and
path prefix, with no user info, query or fragment. Pure data: the checks that use them (resolution, the
addresses, redirects) are in bot/tools/http_check.py."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from yarl import URL

IP = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Allowed:
    scheme: str
    host: str
    port: int
    path: str
    text: str

    def matches(self, url: URL) -> bool:
        if (url.scheme, (url.host or "").lower(), url.port) != (self.scheme, self.host, self.port):
            return False
        prefix = self.path.rstrip("/")
        return url.path == prefix or url.path.startswith(prefix + "/") or not prefix

    def names(self, ip: IP) -> bool:
        try:
            return ipaddress.ip_address(self.host) == ip
        except ValueError:
            return False


def parse_allowed(text: str) -> Allowed:
    url = URL(text)
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"{text!r} is not an http(s) URL")
    if url.user is not None or url.password is not None or url.query_string or url.fragment:
        raise ValueError(f"{text!r}: an allow entry is scheme://host[:port][/path prefix], without user, query or #")
    return Allowed(url.scheme, url.host.lower(), url.port or 0, url.path or "/", text)


def check_allow(value: tuple[str, ...]) -> tuple[str, ...]:
    """`allow:` entries, each checked by `parse_allowed`."""
    for entry in value:
        parse_allowed(entry)
    return value


def check_networks(value: tuple[str, ...]) -> tuple[str, ...]:
    """`networks:` entries (CIDR) a listed host may resolve to although loopback or private."""
    for net in value:
        ipaddress.ip_network(net, strict=False)
    return value
