"""http_check through the real ToolExecutor against servers on 127.0.0.1: plain and TLS (a CA and a
certificate made here), redirects in and out of the allow-list, slow and huge bodies, and the SSRF attempts
the sandbox refuses (outside the list, user info, other schemes, loopback not named, metadata addresses,
DNS rebinding)."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from bot.engine.messages import Scope, ToolCall, ToolResult
from bot.engine.run.context import RunContext
from bot.engine.run.executor import ToolExecutor
from bot.engine.spec.profiles import ProfileLoader
from bot.redact import SecretRedactor
from bot.tools import builtin_tools
from tests.fakes.loopback import LoopbackServer
from tests.helpers import write_agent

_ids = itertools.count(1)


class TlsLoopbackServer(LoopbackServer):
    def __init__(self, app: web.Application, context: ssl.SSLContext) -> None:
        super().__init__(app)
        self.context = context

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def _start(self) -> None:
        self._runner = web.AppRunner(self.app, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.context)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


def make_tls(folder: Path, days: int = 30) -> tuple[Path, ssl.SSLContext]:
    """A CA and a server certificate for 127.0.0.1 / localhost, valid `days` more days: (CA file, server context)."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Yokebot Test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
          .not_valid_after(now + dt.timedelta(days=365))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    import ipaddress

    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "status.test")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    ca_file = folder / "ca.pem"
    ca_file.write_bytes(ca.public_bytes(pem))
    (folder / "server.pem").write_bytes(cert.public_bytes(pem))
    (folder / "server.key").write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                          serialization.NoEncryption()))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(folder / "server.pem", folder / "server.key")
    return ca_file, context


hits: list[str] = []


def site_app() -> web.Application:
    async def health(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(text="status: OK\x1b[31m all good\n", headers={"Server": "test-site", "Set-Cookie": "a=b"})

    async def moved(request: web.Request) -> web.Response:
        hits.append(request.path)
        raise web.HTTPFound(request.query.get("to", "/health"))

    async def slow(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        await resp.write(b"first part ")
        await asyncio.sleep(30)
        return resp

    async def huge(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        for _ in range(200):  # 12.8 MB unless the reader stops
            await resp.write(b"x" * 65536)
        return resp

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/moved", moved)
    app.router.add_get("/slow", slow)
    app.router.add_get("/huge", huge)
    return app


@pytest.fixture
def site() -> Iterator[LoopbackServer]:
    hits.clear()
    server = LoopbackServer(site_app()).start()
    yield server
    server.stop()


async def check(tmp: Path, conf: dict[str, Any], args: dict[str, Any]) -> ToolResult:
    agents = tmp / f"agents{next(_ids)}"
    write_agent(agents, "web", f"description: web\ntools:\n  http_check: {json.dumps(conf)}\n")
    profile = ProfileLoader(agents, builtin_tools()).load("web")
    executor = ToolExecutor(builtin_tools(), redact=SecretRedactor([]))
    run = RunContext("s1", "t1", profile, Scope("slack", "C1", "th1", "U1"), "mention")
    return await executor.execute(ToolCall(f"c{next(_ids)}", "http_check", json.dumps(args)), run)


async def test_a_get_reports_status_latency_headers_and_an_excerpt(site, tmp_path):
    result = await check(tmp_path, {"allow": [f"{site.url}/health"]}, {"url": f"{site.url}/health"})
    assert result.status == "ok", result.content
    lines = result.content.splitlines()
    assert lines[0].startswith(f"GET {site.url}/health -> 200 OK in ") and lines[0].endswith(" ms")
    assert lines[1] == "headers: content-type: text/plain; charset=utf-8; content-length: 25; server: test-site"
    assert lines[2] == "body: 25 bytes"
    assert lines[3] == "body starts: status: OK\ufffd[31m all good"  # no escape sequence reaches the model
    assert "a=b" not in result.content  # cookies are not shown
    expect = await check(tmp_path, {"allow": [f"{site.url}/"]}, {"url": f"{site.url}/health", "expect": "OK"})
    assert expect.content.splitlines()[-1] == "expected text 'OK': present"
    absent = await check(tmp_path, {"allow": [f"{site.url}/"]}, {"url": f"{site.url}/health", "expect": "DOWN"})
    assert absent.content.splitlines()[-1] == "expected text 'DOWN': NOT present"
    head = await check(tmp_path, {"allow": [f"{site.url}/"]}, {"url": f"{site.url}/health", "method": "HEAD"})
    assert head.content.startswith(f"HEAD {site.url}/health -> 200 OK") and "body" not in head.content


async def test_tls_reports_the_certificate_issuer_and_expiry(tmp_path):
    ca_file, context = make_tls(tmp_path, days=30)
    server = TlsLoopbackServer(site_app(), context).start()
    try:
        good = await check(tmp_path, {"allow": [f"{server.url}/"], "ca_file": str(ca_file)},
                           {"url": f"{server.url}/health"})
        untrusted = await check(tmp_path, {"allow": [f"{server.url}/"]}, {"url": f"{server.url}/health"})
    finally:
        server.stop()
    assert good.status == "ok", good.content
    tls = next(line for line in good.content.splitlines() if line.startswith("TLS:"))
    assert tls.startswith("TLS: certificate for commonName=status.test, issued by commonName=Yokebot Test CA, expires ")
    assert tls.endswith("(in 29 days)") or tls.endswith("(in 30 days)")
    assert untrusted.status == "error"
    assert untrusted.content.startswith("Error: the TLS certificate of 127.0.0.1 was not accepted:")
    assert "certificate verify failed" in untrusted.content


async def test_a_redirect_on_the_list_is_followed(site, tmp_path):
    result = await check(tmp_path, {"allow": [f"{site.url}/"]}, {"url": f"{site.url}/moved"})
    assert result.status == "ok", result.content
    lines = result.content.splitlines()
    assert lines[0].startswith(f"GET {site.url}/health -> 200 OK")
    assert lines[1] == f"redirect: {site.url}/moved -> 302 /health"
    assert hits == ["/moved", "/health"]


async def test_a_redirect_off_the_list_is_denied_and_not_followed(site, tmp_path):
    other = LoopbackServer(site_app()).start()
    try:
        target = f"{other.url}/health"
        result = await check(tmp_path, {"allow": [f"{site.url}/moved"]}, {"url": f"{site.url}/moved?to={target}"})
        inside = await check(tmp_path, {"allow": [f"{site.url}/moved"]}, {"url": f"{site.url}/moved"})
    finally:
        other.stop()
    assert result.status == "denied"
    assert result.content.startswith(f"Denied by the sandbox: {site.url}/moved?to={target} redirects (302) to "
                                     f"{target}, which was not followed: {target} is not on this agent's")
    assert inside.status == "denied" and "/health is not on this agent's http_check allow-list" in inside.content
    assert hits == ["/moved", "/moved"]  # the other server and /health were never asked


async def test_a_slow_body_and_a_huge_body_are_cut(site, tmp_path):
    slow = await check(tmp_path, {"allow": [f"{site.url}/"], "request_timeout": 1}, {"url": f"{site.url}/slow"})
    assert slow.status == "ok", slow.content
    assert "body: 11 bytes (the body did not finish within 1 s)" in slow.content
    assert slow.content.endswith("body starts: first part")
    huge = await check(tmp_path, {"allow": [f"{site.url}/"], "max_body_bytes": 100000}, {"url": f"{site.url}/huge"})
    assert huge.status == "ok", huge.content
    assert "body: 100,000 bytes (cut at max_body_bytes 100,000)" in huge.content


@pytest.mark.parametrize(("url", "reason"), [
    ("{site}/admin", "{site}/admin is not on this agent's http_check allow-list"),
    ("{site}/healthz", "{site}/healthz is not on this agent's http_check allow-list"),  # prefix, not a string start
    ("http://127.0.0.1:{port}@localhost:{port}/health", "the URL carries user info (user@host)"),
    ("http://user:pw@127.0.0.1:{port}/health", "the URL carries user info (user@host)"),
    ("file:///etc/passwd", "only http and https URLs can be checked, not 'file'"),
    ("gopher://127.0.0.1:{port}/health", "only http and https URLs can be checked, not 'gopher'"),
    ("{site}/health/%2e%2e/admin", "{site}/admin is not on this agent's"),  # yarl folds the dots first
    ("{site}/health%2f..%2fadmin", "the URL's path has dot segments or encoded slashes"),
    ("https://127.0.0.1:{port}/health", "https://127.0.0.1:{port}/health is not on this agent's"),
])
async def test_ssrf_attempts_are_denied_with_the_sandbox_reason(site, tmp_path, url, reason):
    port = site.port
    result = await check(tmp_path, {"allow": [f"{site.url}/health"]}, {"url": url.format(site=site.url, port=port)})
    assert result.status == "denied", result.content
    assert result.reason.startswith(reason.format(site=site.url, port=port)), result.reason
    assert result.content.startswith("Denied by the sandbox: ") and f"Allowed: {site.url}/health." in result.content
    assert hits == []


async def test_loopback_by_name_needs_its_network_named(site, tmp_path):
    url = f"http://localhost:{site.port}/health"
    denied = await check(tmp_path, {"allow": [f"http://localhost:{site.port}/"]}, {"url": url})
    assert denied.status == "denied"
    assert denied.reason.startswith("localhost resolves to ") and "a loopback address the allow-list does not name" \
        in denied.reason
    allowed = await check(tmp_path, {"allow": [f"http://localhost:{site.port}/"], "networks": ["127.0.0.0/8", "::1/128"]},
                          {"url": url})
    assert allowed.status == "ok", allowed.content


@pytest.mark.parametrize(("host", "why"), [
    ("169.254.169.254", "a cloud metadata address"),
    ("[::ffff:169.254.169.254]", "a cloud metadata address"),
    ("169.254.10.1", "a link-local address"),
    ("[fe80::1]", "a link-local address"),
    ("0.0.0.0", "not a unicast address"),
])
async def test_metadata_and_link_local_addresses_are_refused_even_when_listed(tmp_path, host, why):
    result = await check(tmp_path, {"allow": [f"http://{host}/"], "networks": ["0.0.0.0/0", "::/0"]},
                         {"url": f"http://{host}/latest/meta-data/"})
    assert result.status == "denied", result.content
    assert why in result.reason


async def test_the_connection_goes_to_the_address_that_was_checked(site, tmp_path, monkeypatch):
    """DNS rebinding: the first answer is checked; a second lookup would say the metadata address. The name
    does not resolve anywhere but here, so the check can only succeed over the pinned address."""
    loop = asyncio.get_running_loop()
    answers: list[str] = []

    async def getaddrinfo(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host != "rebind.test":
            raise socket.gaierror(socket.EAI_NONAME, "unknown")
        address = "127.0.0.1" if not answers else "169.254.169.254"
        answers.append(address)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port)))]

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)
    result = await check(tmp_path, {"allow": [f"http://rebind.test:{site.port}/"], "networks": ["127.0.0.0/8"]},
                         {"url": f"http://rebind.test:{site.port}/health"})
    assert result.status == "ok", result.content
    assert answers == ["127.0.0.1"] and hits == ["/health"]


async def test_a_refused_connection_is_one_sentence(tmp_path):
    from tests.helpers import free_port

    url = f"http://127.0.0.1:{free_port()}/health"
    result = await check(tmp_path, {"allow": [url]}, {"url": url})
    assert result.status == "error" and result.content.startswith(f"Error: GET {url} failed: ClientConnectorError")


def test_an_allow_entry_with_user_info_is_refused_at_load(tmp_path):
    from bot.engine.errors import ProfileError

    write_agent(tmp_path, "w", 'description: w\ntools:\n  http_check: {allow: ["http://u:p@h/"]}\n')
    with pytest.raises(ProfileError, match="without user, query or #"):
        ProfileLoader(tmp_path, builtin_tools()).load("w")
