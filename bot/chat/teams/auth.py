"""Every request to `/teams/messages` carries a JWT from the Bot Connector; nothing is read from an activity
whose token does not pass here, and no setting turns this off.

Checked: the signature, with a key from the JWKS that the OpenID metadata at `TEAMS_OPENID_METADATA_URL` names
(Microsoft's by default; tests point it at an issuer of their own); the issuer the metadata names; the audience
(`TEAMS_APP_ID`); expiry and not-before, with five minutes of clock skew as Microsoft's SDKs allow; then, against
the activity, the `serviceurl` claim (the connector signs the serviceUrl it sends, so a replayed token cannot
point yokebot elsewhere) and the key's endorsements (a key endorsed for other channels does not sign Teams')."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

import aiohttp
import jwt

from bot.config import Settings

log = logging.getLogger(__name__)

LEEWAY_SECONDS = 300
KEYS_FOR_SECONDS = 24 * 3600  # Microsoft rolls keys over days; an unknown kid refetches sooner
REFETCH_AFTER_SECONDS = 60.0  # at most one refetch a minute for unknown kids (a forged kid cannot hammer it)
ALGORITHMS = ["RS256"]


class Unauthorized(Exception):
    """The request is not from the Bot Connector: 401, nothing stored."""


def bearer(header: str | None) -> str | None:
    scheme, _, token = (header or "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class InboundAuth:
    def __init__(self, settings: Settings, http: Callable[[], aiohttp.ClientSession]) -> None:
        self.metadata_url, self.app_id, self.http = settings.teams_openid_metadata_url, settings.teams_app_id, http
        self.issuer: str | None = None
        self.keys: dict[str, dict[str, Any]] = {}
        self.fetched = 0.0  # when the keys were last read
        self.tried = 0.0  # when they were last asked for (a failed read is not retried per request either)
        self._lock = asyncio.Lock()

    async def refresh(self) -> int:
        """Read the metadata and its JWKS again; the number of signing keys."""
        timeout = aiohttp.ClientTimeout(total=10)
        async with self.http().get(self.metadata_url, timeout=timeout) as resp:
            resp.raise_for_status()
            metadata = cast(dict[str, Any], await resp.json(content_type=None))
        async with self.http().get(str(metadata["jwks_uri"]), timeout=timeout) as resp:
            resp.raise_for_status()
            jwks = cast(dict[str, Any], await resp.json(content_type=None))
        keys = {str(k.get("kid")): k for k in cast(list[dict[str, Any]], jwks.get("keys") or [])}
        self.issuer, self.keys, self.fetched = str(metadata["issuer"]), keys, time.monotonic()
        return len(keys)

    async def _key(self, kid: str) -> dict[str, Any] | None:
        async with self._lock:
            now = time.monotonic()
            stale = not self.fetched or now - self.fetched > KEYS_FOR_SECONDS or kid not in self.keys
            if stale and (not self.tried or now - self.tried > REFETCH_AFTER_SECONDS):
                self.tried = now
                try:
                    await self.refresh()
                except (aiohttp.ClientError, TimeoutError, KeyError, ValueError) as exc:
                    log.warning("teams: cannot read the OpenID metadata at %s: %s", self.metadata_url, exc)
            return self.keys.get(kid)

    async def verify(self, token: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the token's claims, the key that signed it); Unauthorized with the reason otherwise."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise Unauthorized(f"not a JWT ({exc})") from None
        if header.get("alg") not in ALGORITHMS:
            raise Unauthorized(f"algorithm {header.get('alg')!r} is not accepted")
        key = await self._key(str(header.get("kid")))
        if key is None or self.issuer is None:
            raise Unauthorized(f"no signing key {header.get('kid')!r} in the OpenID metadata's JWKS")
        try:
            claims = jwt.decode(token, jwt.PyJWK(key).key, algorithms=ALGORITHMS, audience=self.app_id,
                                issuer=self.issuer, leeway=LEEWAY_SECONDS,
                                options={"require": ["exp", "iss", "aud"]})
        except jwt.PyJWTError as exc:
            raise Unauthorized(str(exc)) from None
        return claims, key

    @staticmethod
    def check_activity(claims: Mapping[str, Any], key: Mapping[str, Any], activity: Mapping[str, Any]) -> None:
        """The token speaks for this activity: its signed serviceUrl is the activity's, and its key is endorsed
        for the activity's channel."""
        signed = str(claims.get("serviceurl") or claims.get("serviceUrl") or "")
        if not signed or signed.rstrip("/") != str(activity.get("serviceUrl") or "").rstrip("/"):
            raise Unauthorized("the token's serviceurl claim is not the activity's serviceUrl")
        endorsed = key.get("endorsements")
        if isinstance(endorsed, list) and str(activity.get("channelId")) not in cast(list[str], endorsed):
            raise Unauthorized(f"the signing key is not endorsed for channel {activity.get('channelId')!r}")
