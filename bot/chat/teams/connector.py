"""The Bot Connector over REST: the bot's own token (OAuth client credentials at the login endpoint, with a
client secret or a certificate), and the calls yokebot makes on a conversation (send, update, delete, a new thread
in a channel, a team's channels).

Every call goes to a serviceUrl on the allow-list (`YOKEBOT_TEAMS_SERVICE_URLS`, Microsoft's connector hosts by
default) and is refused before a byte leaves otherwise: the bot's token is only ever sent to Microsoft, whatever
an activity or a stored reference says."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, cast
from urllib.parse import quote

import aiohttp

from bot.config import Settings
from bot.engine.errors import ConfigError

log = logging.getLogger(__name__)

SCOPE = "https://api.botframework.com/.default"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
EARLY_SECONDS = 300  # a token is renewed this long before it expires
RETRIED = (429, 502, 503, 504)
MAX_ATTEMPTS = 3


class TokenRefused(Exception):
    """The login endpoint refused the app's credentials (its error code and first line)."""


class ConnectorError(Exception):
    """The Bot Connector refused a call (or it was never sent: a serviceUrl off the allow-list)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text}" if status else text)
        self.status = status


def allowed(settings: Settings, service_url: str) -> bool:
    """Is `service_url` one of the Bot Connector hosts a reply may go to (a prefix of the allow-list)?"""
    url = service_url.rstrip("/") + "/"
    return any(url.startswith(prefix.rstrip("/") + "/") for prefix in settings.teams_service_urls)


class BotToken:
    """The app's access token for the Bot Connector, cached until shortly before it expires."""

    def __init__(self, settings: Settings, http: Callable[[], aiohttp.ClientSession]) -> None:
        if settings.teams_app_id is None:
            raise ConfigError("Teams needs TEAMS_APP_ID.")
        self.app_id = settings.teams_app_id
        if settings.teams_app_password is None and settings.teams_certificate_path is None:
            raise ConfigError("TEAMS_APP_ID is set, but neither TEAMS_APP_PASSWORD (a client secret) nor "
                              "TEAMS_CERTIFICATE_PATH (a PEM with the certificate and its key) is: set one.")
        tenant = settings.teams_tenant_id or "botframework.com"  # the latter: a multi-tenant registration
        self.url = f"{settings.teams_login_url.rstrip('/')}/{tenant}/oauth2/v2.0/token"
        self.settings, self.http = settings, http
        self._token: str | None = None
        self._until = 0.0
        self._lock = asyncio.Lock()

    async def get(self) -> str:
        async with self._lock:
            if self._token is None or time.monotonic() > self._until:
                self._token, lifetime = await self._fetch()
                self._until = time.monotonic() + max(60.0, lifetime - EARLY_SECONDS)
            return self._token

    def forget(self) -> None:
        self._token = None

    async def _fetch(self) -> tuple[str, float]:
        form = {"grant_type": "client_credentials", "client_id": self.app_id, "scope": SCOPE}
        if self.settings.teams_app_password is not None:
            form["client_secret"] = self.settings.teams_app_password.get_secret_value()
        else:
            form |= {"client_assertion_type": ASSERTION_TYPE, "client_assertion": self._assertion()}
        async with self.http().post(self.url, data=form, timeout=aiohttp.ClientTimeout(total=10)) as resp:
            body = cast(dict[str, Any], await resp.json(content_type=None))
        if "access_token" not in body:
            said = str(body.get("error_description") or "").splitlines()[:1]
            raise TokenRefused(f"{body.get('error', f'HTTP {resp.status}')}: {said[0] if said else ''}".strip(": "))
        return str(body["access_token"]), float(body.get("expires_in") or 3600)

    def _assertion(self) -> str:
        """A client assertion signed with the certificate's key (RFC 7523; `x5t`: the certificate's thumbprint)."""
        import jwt
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization

        path = self.settings.teams_certificate_path
        assert path is not None
        pem = path.read_bytes()
        cert = x509.load_pem_x509_certificate(pem)
        key = serialization.load_pem_private_key(pem, password=None)
        thumb = base64.urlsafe_b64encode(cert.fingerprint(hashes.SHA1())).decode().rstrip("=")  # noqa: S303 - x5t is SHA-1 by definition
        now = int(time.time())
        claims = {"aud": self.url, "iss": self.app_id, "sub": self.app_id, "jti": str(uuid.uuid4()),
                  "nbf": now, "exp": now + 600}
        return jwt.encode(claims, cast(Any, key), algorithm="RS256", headers={"x5t": thumb})


def digest(conversation: str) -> str:
    """A short, stable form of a conversation id (they run to 150 characters) for keys and refs."""
    return hashlib.blake2b(conversation.encode(), digest_size=8).hexdigest()


class Connector:
    """The Bot Connector's conversation calls, with the bot's token, on allowed serviceUrls only."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._session: aiohttp.ClientSession | None = None
        self.token = BotToken(settings, self.http)

    def http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        return self._session

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def allowed(self, service_url: str) -> bool:
        return allowed(self.settings, service_url)

    async def call(self, method: str, service_url: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        if not self.allowed(service_url):
            raise ConnectorError(0, f"the serviceUrl {service_url} is not on YOKEBOT_TEAMS_SERVICE_URLS: not sent")
        url = service_url.rstrip("/") + path
        for attempt in range(1, MAX_ATTEMPTS + 1):
            headers = {"Authorization": f"Bearer {await self.token.get()}"}
            async with self.http().request(method, url, json=body, headers=headers) as resp:
                if resp.status == 401 and attempt == 1:
                    self.token.forget()  # revoked or rotated: one more try with a fresh token
                    continue
                if resp.status in RETRIED and attempt < MAX_ATTEMPTS:
                    await asyncio.sleep(min(5.0, float(resp.headers.get("Retry-After") or 0.5 * attempt)))
                    continue
                if resp.status >= 400:
                    raise ConnectorError(resp.status, (await resp.text())[:300])
                return await resp.json(content_type=None) if resp.content_length != 0 else None
        raise ConnectorError(0, "no answer")

    async def send(self, service_url: str, conversation: str, activity: Mapping[str, Any]) -> str:
        found = await self.call("POST", service_url, f"/v3/conversations/{quote(conversation, safe='')}/activities",
                                activity)
        return str(cast(dict[str, Any], found or {}).get("id") or "")

    async def update(self, service_url: str, conversation: str, activity_id: str,
                     activity: Mapping[str, Any]) -> None:
        await self.call("PUT", service_url, f"/v3/conversations/{quote(conversation, safe='')}/activities/"
                                            f"{quote(activity_id, safe='')}", {**activity, "id": activity_id})

    async def delete(self, service_url: str, conversation: str, activity_id: str) -> None:
        await self.call("DELETE", service_url, f"/v3/conversations/{quote(conversation, safe='')}/activities/"
                                               f"{quote(activity_id, safe='')}")

    async def new_thread(self, service_url: str, channel: str, tenant: str | None,
                         activity: Mapping[str, Any]) -> tuple[str, str]:
        """A new post in a team channel (its reply chain is a conversation): (conversation id, activity id)."""
        body: dict[str, Any] = {"isGroup": True, "activity": activity,
                                "channelData": {"channel": {"id": channel}, **({"tenant": {"id": tenant}} if tenant
                                                                              else {})}}
        if tenant:
            body["tenantId"] = tenant
        found = cast(dict[str, Any], await self.call("POST", service_url, "/v3/conversations", body) or {})
        activity_id = str(found.get("activityId") or "")
        return str(found.get("id") or f"{channel};messageid={activity_id}"), activity_id

    async def channels(self, service_url: str, team: str) -> list[tuple[str, str]]:
        """(id, name) of a team's channels; the General channel has no name there, and is called General."""
        found = cast(dict[str, Any], await self.call("GET", service_url, f"/v3/teams/{quote(team, safe='')}/"
                                                                         "conversations") or {})
        listed = cast(list[dict[str, Any]], found.get("conversations") or [])
        return [(str(c.get("id")), str(c.get("name") or "General")) for c in listed]


