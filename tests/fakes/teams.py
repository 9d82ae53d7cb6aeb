"""A fake Microsoft Teams on 127.0.0.1: the Bot Connector (conversations, activities, a team's channels), the
login endpoint (client credentials -> a bearer token) and an OpenID issuer (metadata and JWKS of a test RSA key,
endorsed for `msteams`), spoken to by yokebot's real client code over real sockets.

`activity()` builds what Teams sends for a message (a channel mention, a group chat mention, a personal chat, a
card submit); `deliver()` signs a real JWT for it (RS256, the claims the connector sends, any of them overridden)
and POSTs it to the bot's `/teams/messages`, as the connector does. Everything the bot sends is recorded:
`sent` (new activities, with their conversation), `updates`, `deletes`, `tokens` (token requests)."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import aiohttp
import jwt
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.fakes.loopback import LoopbackServer

APP_ID = "00000000-aaaa-4bbb-8ccc-000000000001"
APP_PASSWORD = "teams-test-secret-123"
TENANT = "11111111-2222-4333-8444-555555555555"
BOT = f"28:{APP_ID}"
TEAM = "19:team-general@thread.tacv2"  # a team's id is its General channel's
OPS = "19:ops-channel@thread.tacv2"
ALERTS = "19:alerts-channel@thread.tacv2"
GROUP = "19:group-chat@thread.v2"
PERSONAL = "a:1personal-chat-with-alice"
ALICE = "aaaaaaaa-0000-4000-8000-00000000000a"  # AAD object ids
BOB = "bbbbbbbb-0000-4000-8000-00000000000b"
ISSUER = "https://api.botframework.com"
KID = "test-key-1"
CHANNELS = {TEAM: None, OPS: "ops", ALERTS: "ops-alerts"}

_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
_OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # what a forger signs with


@dataclass
class Sent:
    conversation: str
    activity: dict[str, Any]
    id: str

    @property
    def text(self) -> str:
        return str(self.activity.get("text") or "")


@dataclass
class FakeTeams:
    server: LoopbackServer | None = None
    sent: list[Sent] = field(default_factory=lambda: list[Sent]())
    updates: list[Sent] = field(default_factory=lambda: list[Sent]())
    deletes: list[tuple[str, str]] = field(default_factory=lambda: list[tuple[str, str]]())
    tokens: list[dict[str, str]] = field(default_factory=lambda: list[dict[str, str]]())
    issued: set[str] = field(default_factory=lambda: set[str]())
    fail_next: int = 0  # refuse the next N connector calls (500)
    certificate: Any = None  # an x509 certificate whose key may sign client assertions (instead of the secret)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1_700_000_000_001))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # --- wiring -----------------------------------------------------------------------------------------
    def start(self) -> FakeTeams:
        app = web.Application()
        app.router.add_get("/openid", self._metadata)
        app.router.add_get("/keys", self._keys)
        app.router.add_post("/{tenant}/oauth2/v2.0/token", self._token)
        app.router.add_post("/connector/v3/conversations", self._create)
        app.router.add_post("/connector/v3/conversations/{cid}/activities", self._send)
        app.router.add_post("/connector/v3/conversations/{cid}/activities/{aid}", self._send)
        app.router.add_put("/connector/v3/conversations/{cid}/activities/{aid}", self._update)
        app.router.add_delete("/connector/v3/conversations/{cid}/activities/{aid}", self._delete)
        app.router.add_get("/connector/v3/teams/{team}/conversations", self._channels)
        self.server = LoopbackServer(app).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    @property
    def service_url(self) -> str:
        return f"{self.url}/connector/"

    def settings(self) -> dict[str, Any]:
        """What Settings need to talk to this fake (the allow-list names its connector, nothing else)."""
        return {"teams_app_id": APP_ID, "teams_app_password": APP_PASSWORD, "teams_tenant_id": TENANT,
                "teams_openid_metadata_url": f"{self.url}/openid", "teams_login_url": self.url,
                "teams_service_urls": [self.service_url]}

    def env(self) -> dict[str, str]:
        return {"TEAMS_APP_ID": APP_ID, "TEAMS_APP_PASSWORD": APP_PASSWORD, "TEAMS_TENANT_ID": TENANT,
                "TEAMS_OPENID_METADATA_URL": f"{self.url}/openid", "TEAMS_LOGIN_URL": self.url,
                "YOKEBOT_TEAMS_SERVICE_URLS": self.service_url}

    def next_id(self) -> str:
        with self._lock:
            return str(next(self._ids))

    # --- what the bot posted ------------------------------------------------------------------------------
    def texts_in(self, conversation: str) -> list[str]:
        return [s.text for s in self.sent if s.conversation == conversation and s.activity.get("type") == "message"]

    def cards_in(self, conversation: str) -> list[Sent]:
        return [s for s in self.sent if s.conversation == conversation and s.activity.get("attachments")]

    # --- the issuer ------------------------------------------------------------------------------------------
    async def _metadata(self, _: web.Request) -> web.Response:
        return web.json_response({"issuer": ISSUER, "jwks_uri": f"{self.url}/keys",
                                  "id_token_signing_alg_values_supported": ["RS256"]})

    async def _keys(self, _: web.Request) -> web.Response:
        jwk: dict[str, Any] = jwt.algorithms.RSAAlgorithm.to_jwk(_KEY.public_key(), as_dict=True)
        return web.json_response({"keys": [{**jwk, "kid": KID, "use": "sig", "endorsements": ["msteams"]}]})

    async def _token(self, request: web.Request) -> web.Response:
        form = {k: str(v) for k, v in (await request.post()).items()}
        self.tokens.append(form)
        if form.get("client_id") != APP_ID or request.match_info["tenant"] != TENANT or not (
                form.get("client_secret") == APP_PASSWORD or self._asserted(form, str(request.url))):
            return web.json_response({"error": "invalid_client",
                                      "error_description": "AADSTS7000215: Invalid client secret provided."},
                                     status=401)
        token = f"bot-token-{len(self.tokens)}"
        self.issued.add(token)
        return web.json_response({"token_type": "Bearer", "expires_in": 3599, "access_token": token})

    def _asserted(self, form: dict[str, str], url: str) -> bool:
        """A client assertion (RFC 7523) signed by the registered certificate's key, naming it by `x5t`."""
        if self.certificate is None or "client_assertion" not in form:
            return False
        import base64

        from cryptography.hazmat.primitives import hashes

        thumb = base64.urlsafe_b64encode(self.certificate.fingerprint(hashes.SHA1())).decode().rstrip("=")
        try:
            if jwt.get_unverified_header(form["client_assertion"]).get("x5t") != thumb:
                return False
            claims = jwt.decode(form["client_assertion"], self.certificate.public_key(), algorithms=["RS256"],
                                audience=url)
        except jwt.PyJWTError:
            return False
        return claims.get("iss") == claims.get("sub") == APP_ID

    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization", "").removeprefix("Bearer ") in self.issued

    def _failing(self) -> bool:
        with self._lock:
            if self.fail_next > 0:
                self.fail_next -= 1
                return True
        return False

    # --- the connector ---------------------------------------------------------------------------------------
    async def _send(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"error": {"code": "Unauthorized"}}, status=401)
        if self._failing():
            return web.json_response({"error": {"code": "ServiceError"}}, status=500)
        body = await request.json()
        sent = Sent(unquote(request.match_info["cid"]), body, self.next_id())
        self.sent.append(sent)
        return web.json_response({"id": sent.id}, status=201)

    async def _create(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"error": {"code": "Unauthorized"}}, status=401)
        body = await request.json()
        channel = str(body["channelData"]["channel"]["id"])
        activity_id = self.next_id()
        conversation = f"{channel};messageid={activity_id}"
        self.sent.append(Sent(conversation, body["activity"], activity_id))
        return web.json_response({"id": conversation, "activityId": activity_id}, status=201)

    async def _update(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"error": {"code": "Unauthorized"}}, status=401)
        body = await request.json()
        self.updates.append(Sent(unquote(request.match_info["cid"]), body, unquote(request.match_info["aid"])))
        return web.json_response({"id": request.match_info["aid"]})

    async def _delete(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"error": {"code": "Unauthorized"}}, status=401)
        self.deletes.append((unquote(request.match_info["cid"]), unquote(request.match_info["aid"])))
        return web.Response(status=200)

    async def _channels(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"error": {"code": "Unauthorized"}}, status=401)
        return web.json_response({"conversations": [{"id": c, "name": n} for c, n in CHANNELS.items()]})

    # --- what Teams sends ------------------------------------------------------------------------------------
    def activity(self, text: str, *, kind: str = "channel", user: str = ALICE, channel: str = OPS,
                 root: str | None = None, mention: bool = True, value: dict[str, Any] | None = None,
                 reply_to: str | None = None, service_url: str | None = None) -> dict[str, Any]:
        """A message activity: in a channel (a new post, or a reply in the chain rooted at `root`), a group
        chat, or a personal chat; `value`: a card submit."""
        activity_id = self.next_id()
        if kind == "channel":
            conversation = {"id": f"{channel};messageid={root or activity_id}", "conversationType": "channel",
                            "isGroup": True, "tenantId": TENANT}
            data: dict[str, Any] = {"teamsChannelId": channel, "channel": {"id": channel}, "team": {"id": TEAM},
                                    "tenant": {"id": TENANT}}
        elif kind == "groupChat":
            conversation = {"id": GROUP, "conversationType": "groupChat", "isGroup": True, "tenantId": TENANT}
            data = {"tenant": {"id": TENANT}}
        else:
            conversation = {"id": PERSONAL, "conversationType": "personal", "tenantId": TENANT}
            data = {"tenant": {"id": TENANT}}
        entities: list[dict[str, Any]] = []
        if mention and kind != "personal":
            text = f"<at>yokebot</at> {text}"
            entities.append({"type": "mention", "text": "<at>yokebot</at>",
                             "mentioned": {"id": BOT, "name": "yokebot"}})
        found: dict[str, Any] = {
            "type": "message", "id": activity_id, "timestamp": "2026-12-03T18:00:00.000Z", "channelId": "msteams",
            "serviceUrl": service_url or self.service_url, "from": {"id": f"29:{user}", "aadObjectId": user,
                                                                    "name": "Alice" if user == ALICE else "Bob"},
            "conversation": conversation, "recipient": {"id": BOT, "name": "yokebot"}, "text": text,
            "textFormat": "plain", "entities": entities, "channelData": data}
        if value is not None:
            found |= {"value": value, "text": "", "entities": []}
        if reply_to is not None:
            found["replyToId"] = reply_to
        return found

    def token(self, activity: dict[str, Any], *, key: Any = None, kid: str = KID, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": APP_ID, "exp": now + 3600, "nbf": now - 10,
                "serviceurl": activity.get("serviceUrl")} | claims
        return jwt.encode({k: v for k, v in body.items() if v is not None}, key or _KEY, algorithm="RS256",
                          headers={"kid": kid})

    @staticmethod
    def forged_key() -> Any:
        return _OTHER_KEY

    async def deliver(self, endpoint: str, activity: dict[str, Any], *, token: str | None = "",
                      **claims: Any) -> int:
        """POST the activity to the bot as the connector does; the HTTP status. `token=None`: no header."""
        headers = {} if token is None else {"Authorization": f"Bearer {token or self.token(activity, **claims)}"}
        async with aiohttp.ClientSession() as http, http.post(endpoint, json=activity, headers=headers) as resp:
            return resp.status
