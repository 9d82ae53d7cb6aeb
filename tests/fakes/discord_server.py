"""A fake Discord: REST under `/api/v10` and a gateway websocket at `/gateway`, on 127.0.0.1, spoken to by the
real discord.py over real sockets.

REST: `/users/@me`, `/users/@me/guilds`, `/oauth2/applications/@me`, `/gateway(/bot)`, a guild's channels,
channels, messages (JSON and multipart with files), threads from a message (one per message, as Discord's
error 160004 says), reactions, typing, interaction
callbacks (recorded in `callbacks`, with how long after the click they came). `click()` dispatches a button's
INTERACTION_CREATE to one connection. Gateway: HELLO, IDENTIFY -> READY + GUILD_CREATE,
heartbeats, dispatches with sequence numbers, RECONNECT and RESUME (missed events are replayed).
Everything the bot sends is recorded: `requests` (REST), `ops` (gateway opcodes), `posted` (messages)."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.loopback import LoopbackServer

BOT_ID = 900_000_000_000_000_001
APP_ID = 900_000_000_000_000_002
GUILD_ID = 800_000_000_000_000_001
GENERAL = 700_000_000_000_000_010  # a text channel
OPS_ALERTS = 700_000_000_000_000_011  # where notify posts
OTHER = 700_000_000_000_000_012  # a channel routed to another agent in tests
ONCALL_ROLE = 600_000_000_000_000_050
DM_CHANNEL = 500_000_000_000_000_001
ALICE = 400_000_000_000_000_001  # an on-call engineer (has the role)
BOB = 400_000_000_000_000_002  # a guild member without the role (allowed by user ID in tests)
CAROL = 400_000_000_000_000_003  # a guild member nobody allowed
OTHER_BOT = 400_000_000_000_000_099

JSON = "application/json"  # exactly: with "; charset=utf-8" discord.py reads the body as text
TS = "2025-01-01T00:00:00.000000+00:00"


def user(uid: int, name: str, bot: bool = False) -> dict[str, Any]:
    return {
        "id": str(uid),
        "username": name,
        "discriminator": "0",
        "global_name": name,
        "avatar": None,
        "bot": bot,
    }


USERS = {
    ALICE: user(ALICE, "alice"),
    BOB: user(BOB, "bob"),
    CAROL: user(CAROL, "carol"),
    BOT_ID: user(BOT_ID, "yokebot", bot=True),
    OTHER_BOT: user(OTHER_BOT, "otherbot", bot=True),
}
ROLES = {ALICE: [str(ONCALL_ROLE)]}


def text_channel(cid: int, name: str) -> dict[str, Any]:
    return {
        "id": str(cid),
        "type": 0,
        "guild_id": str(GUILD_ID),
        "name": name,
        "position": 0,
        "permission_overwrites": [],
        "nsfw": False,
        "parent_id": None,
        "topic": None,
        "rate_limit_per_user": 0,
        "last_message_id": None,
        "flags": 0,
    }


def role(rid: int, name: str) -> dict[str, Any]:
    return {
        "id": str(rid),
        "name": name,
        "permissions": "0",
        "position": 0,
        "color": 0,
        "hoist": False,
        "managed": False,
        "mentionable": False,
        "flags": 0,
    }


def respond(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(data).encode(), status=status, headers={"Content-Type": JSON, **(headers or {})}
    )


def too_long() -> web.Response:
    """As Discord answers a message of more than 2,000 characters."""
    return respond({"message": "Invalid Form Body", "code": 50035, "errors": {"content": {"_errors": [
        {"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]}}}, 400)


@dataclass
class Posted:
    """A message the bot created."""

    channel: int
    id: int
    content: str
    body: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=lambda: dict[str, bytes]())


@dataclass
class Callback:
    """The bot's answer to an interaction: type 4 (message; flags 64: ephemeral) or 7 (update the message)."""

    interaction: int
    type: int
    data: dict[str, Any]
    seconds: float  # after the click was dispatched

    @property
    def ephemeral(self) -> bool:
        return bool(self.data.get("flags", 0) & 64)


class FakeDiscord:
    def __init__(self) -> None:
        self._ids = itertools.count(int(time.time() * 1000) << 22)
        self._lock = threading.Lock()
        self.requests: list[tuple[str, str, Any]] = []  # (method, path, json body or None)
        self.posted: list[Posted] = []
        self.held_posts: threading.Event | None = None  # hold_posts(): created messages answered late
        self.reactions: list[tuple[int, int, str]] = []  # (channel, message, emoji)
        self.typing: list[int] = []
        self.edits: list[tuple[int, int, str]] = []  # (channel, message, new content), in order
        self.deleted: list[tuple[int, int]] = []  # (channel, message)
        self.gone: set[int] = set()  # messages someone else deleted: editing or deleting them is a 404
        self.threads: dict[int, dict[str, Any]] = {}
        self.ops: list[int] = []  # gateway opcodes the bot sent, in order (1 heartbeat, 2 identify, 6 resume)
        self.resumes: list[dict[str, Any]] = []
        # (method, path suffix, status, retry_after): the next matching request gets this error
        self.faults: list[tuple[str, str, int, float]] = []
        self.events: list[tuple[int, dict[str, Any]]] = []  # (seq, frame) dispatched in this session
        self.callbacks: list[Callback] = []  # interaction callbacks the bot sent
        self._clicked: dict[int, float] = {}  # interaction id -> when it was dispatched
        self.app_commands: dict[str, list[dict[str, Any]]] = {}  # "global" or a guild ID -> commands registered
        self.followups: list[tuple[int, dict[str, Any]]] = []  # (interaction id, body) of follow-up messages
        self.originals: dict[int, Posted] = {}  # interaction id -> its (deferred) response message
        self._interactions: dict[str, tuple[int, int]] = {}  # token -> (interaction id, channel)
        self.session_id = "fake-session-1"
        self.token: str | None = None  # when set, any other token gets a 401
        self.channels: dict[int, dict[str, Any]] = {
            c: text_channel(c, n)
            for c, n in ((GENERAL, "general"), (OPS_ALERTS, "ops-alerts"), (OTHER, "other"))
        }
        self._seq = 0
        self._sockets: list[web.WebSocketResponse] = []  # gateway connections (two bots may share a token)
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/attachments/{name:.*}", self._attachment)  # the CDN, on the same host and port
        self.files: dict[str, tuple[bytes, str]] = {}
        self.file_gets: list[tuple[str, str | None]] = []  # (name, Authorization header)
        app.router.add_route("*", "/api/v10/{path:.*}", self._rest)
        self.server = LoopbackServer(app)

    # --- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> FakeDiscord:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.call(self._close_ws())
        self.server.stop()

    async def _close_ws(self) -> None:
        for ws in list(self._sockets):
            await ws.close()

    @property
    def api_url(self) -> str:
        return f"{self.server.url}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.server.port}/gateway"

    def new_id(self) -> int:
        with self._lock:
            return next(self._ids)

    # --- driving it from a test -----------------------------------------------------------------------------
    def dispatch(self, event: str, data: dict[str, Any]) -> None:
        self.server.call(self._dispatch(event, data))

    def message_data(
        self,
        mid: int,
        channel: int,
        content: str,
        author: int = ALICE,
        *,
        guild: bool = True,
        mention_bot: bool = False,
    ) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": str(mid),
            "channel_id": str(channel),
            "author": USERS[author],
            "content": content,
            "timestamp": TS,
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [user(BOT_ID, "yokebot", bot=True)] if mention_bot else [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
        }
        if guild:
            data["guild_id"] = str(GUILD_ID)
            data["member"] = {
                "roles": ROLES.get(author, []),
                "joined_at": TS,
                "deaf": False,
                "mute": False,
                "flags": 0,
            }
        return data

    def send_message(
        self,
        channel: int,
        content: str,
        author: int = ALICE,
        *,
        guild: bool = True,
        mention_bot: bool = False,
    ) -> int:
        """A user posts a message; returns its id."""
        mid = self.new_id()
        self.dispatch(
            "MESSAGE_CREATE",
            self.message_data(mid, channel, content, author, guild=guild, mention_bot=mention_bot),
        )
        return mid

    def dm_with_files(self, content: str, files: list[tuple[str, bytes, str]], author: int = ALICE,
                      urls: dict[str, str] | None = None) -> int:
        """A DM carrying attachments (name, bytes, content type), served at the fake CDN; `urls` overrides
        the URL given for a name (another host, an expired link)."""
        mid = self.new_id()
        data = self.message_data(mid, DM_CHANNEL, content, author, guild=False)
        for name, body, ctype in files:
            self.files[name] = (body, ctype)
            url = (urls or {}).get(name, f"{self.server.url}/attachments/{mid}/{name}")
            data["attachments"].append({"id": str(self.new_id()), "filename": name, "size": len(body), "url": url,
                                        "proxy_url": url, "content_type": ctype})
        self.dispatch("MESSAGE_CREATE", data)
        return mid

    async def _attachment(self, request: web.Request) -> web.Response:
        name = request.match_info["name"].split("/", 1)[-1]
        self.file_gets.append((name, request.headers.get("Authorization")))
        if name not in self.files:
            return web.Response(status=404, text="expired")
        body, ctype = self.files[name]
        return web.Response(body=body, content_type=ctype)

    def edit_message(self, mid: int, channel: int, content: str, author: int = ALICE) -> None:
        data = self.message_data(mid, channel, content, author, mention_bot=f"<@{BOT_ID}>" in content)
        self.dispatch("MESSAGE_UPDATE", {**data, "edited_timestamp": TS})

    def mention(self, content: str, channel: int = GENERAL, author: int = ALICE) -> int:
        return self.send_message(channel, f"<@{BOT_ID}> {content}", author, mention_bot=True)

    def dm(self, content: str, author: int = ALICE) -> int:
        return self.send_message(DM_CHANNEL, content, author, guild=False)

    def click(self, custom_id: str, message: Posted, author: int, to: int | None = None) -> int:
        """`author` clicks the button `custom_id` on the bot's message; dispatched to connection `to` (Discord
        sends an interaction to one session) or to all. Returns the interaction id."""
        iid = self.new_id()
        data: dict[str, Any] = {
            "id": str(iid), "application_id": str(APP_ID), "type": 3, "token": f"token-{iid}", "version": 1,
            "guild_id": str(GUILD_ID), "channel_id": str(message.channel),
            "channel": {"id": str(message.channel)}, "attachment_size_limit": 8_388_608,
            "data": {"custom_id": custom_id, "component_type": 2},
            "member": {"user": USERS[author], "roles": ROLES.get(author, []), "joined_at": TS, "deaf": False,
                       "mute": False, "flags": 0, "permissions": "0"},
            "message": self._message(message.channel, message.id, message.content),
            "locale": "en-US", "app_permissions": "0",
        }
        self._clicked[iid] = time.perf_counter()
        self.server.call(self._dispatch_to("INTERACTION_CREATE", data, to))
        return iid

    def command(self, sub: str, options: dict[str, str] | None = None, author: int = ALICE,
                channel: int = GENERAL, guild: int | None = GUILD_ID) -> int:
        """`author` runs `/yokebot <sub>` (with its options) in `channel`: an application command's
        INTERACTION_CREATE (`guild` None: in the DM). Returns the interaction id."""
        iid = self.new_id()
        opts = [{"type": 3, "name": k, "value": v} for k, v in (options or {}).items()]
        data: dict[str, Any] = {
            "id": str(iid), "application_id": str(APP_ID), "type": 2, "token": f"token-{iid}", "version": 1,
            "channel_id": str(channel), "locale": "en-US", "app_permissions": "0", "entitlements": [],
            "attachment_size_limit": 8_388_608,
            "data": {"id": str(APP_ID + 1), "name": "yokebot", "type": 1,
                     "options": [{"type": 1, "name": sub, "options": opts}]},
        }
        if guild is not None:
            where = self.channels.get(channel) or self.threads.get(channel) or text_channel(channel, "elsewhere")
            data |= {"guild_id": str(guild), "channel": {**where, "guild_id": str(guild)},
                     "member": {"user": USERS[author], "roles": ROLES.get(author, []), "joined_at": TS,
                                "deaf": False, "mute": False, "flags": 0, "permissions": "0"}}
        else:
            data |= {"user": USERS[author], "channel": {"id": str(channel), "type": 1}}
        self._clicked[iid] = time.perf_counter()
        self._interactions[f"token-{iid}"] = (iid, channel)
        self.server.call(self._dispatch_to("INTERACTION_CREATE", data, None))
        return iid

    def followed_up(self, iid: int) -> list[dict[str, Any]]:
        return [body for i, body in self.followups if i == iid]

    def _webhook(self, method: str, token: str, rest: list[str], body: Any) -> web.Response:
        iid, channel = self._interactions.get(token, (0, GENERAL))
        if len((body or {}).get("content") or "") > 2000:
            return too_long()
        if method == "POST" and not rest:
            self.followups.append((iid, body or {}))
            return respond({**self._message(channel, self.new_id(), (body or {}).get("content", "")),
                            "flags": (body or {}).get("flags", 0)})
        if rest == ["messages", "@original"] and method == "PATCH":
            content = (body or {}).get("content", "")
            original = self.originals.get(iid)
            if original is None:
                original = self.originals[iid] = Posted(channel, self.new_id(), content, body or {})
                self.posted.append(original)
            else:
                self.edits.append((channel, original.id, content))
                original.content = content
            return respond(self._message(channel, original.id, content))
        if rest == ["messages", "@original"] and method == "DELETE":
            original = self.originals.get(iid)
            if original is not None:
                self.deleted.append((channel, original.id))
            return web.Response(status=204)
        return respond({"message": "404: Not Found", "code": 0}, 404)

    def _registered(self, scope: str, body: Any) -> web.Response:
        self.app_commands[scope] = list(body or [])
        return respond([{**c, "id": str(APP_ID + 1 + i), "application_id": str(APP_ID), "version": "1",
                         "type": c.get("type", 1), "default_member_permissions": None, "dm_permission": True,
                         "nsfw": False, **({} if scope == "global" else {"guild_id": scope})}
                        for i, c in enumerate(self.app_commands[scope])])

    async def _dispatch_to(self, event: str, data: dict[str, Any], to: int | None) -> None:
        await self._dispatch(event, data, self._sockets[to] if to is not None else None)

    def reconnect(self) -> None:
        """Ask the bot to reconnect (op 7), as Discord does when it moves a session."""
        self.server.call(self._send_raw({"op": 7, "d": None}))

    def rate_limit(self, method: str, suffix: str, retry_after: float = 0.3) -> None:
        """Answer the next `method` request whose path ends with `suffix` with a 429."""
        self.faults.append((method, suffix, 429, retry_after))

    def forbid(self, method: str, suffix: str) -> None:
        """Answer the next `method` request whose path ends with `suffix` with a 403 (missing permission)."""
        self.faults.append((method, suffix, 403, 0.0))

    def shown(self, mid: int) -> list[str]:
        """What the bot's message `mid` showed, in order: as sent, then after each edit."""
        first = [p.content for p in self.posted if p.id == mid]
        return first + [content for _, m, content in self.edits if m == mid]

    def posted_in(self, channel: int) -> list[Posted]:
        return [p for p in self.posted if p.channel == channel]

    # --- gateway --------------------------------------------------------------------------------------------
    async def _send_raw(self, frame: dict[str, Any], to: web.WebSocketResponse | None = None) -> None:
        """To one connection, or to every open one (two instances with one token both get each event)."""
        for ws in [to] if to is not None else list(self._sockets):
            if not ws.closed:
                await ws.send_str(json.dumps(frame))

    async def _dispatch(self, event: str, data: dict[str, Any], to: web.WebSocketResponse | None = None) -> None:
        self._seq += 1
        frame = {"op": 0, "t": event, "s": self._seq, "d": data}
        self.events.append((self._seq, frame))
        await self._send_raw(frame, to)  # while disconnected it is only buffered, and replayed on RESUME

    def _ready(self) -> dict[str, Any]:
        return {
            "v": 10,
            "user": user(BOT_ID, "yokebot", bot=True),
            "guilds": [{"id": str(GUILD_ID), "unavailable": True}],
            "session_id": self.session_id,
            "resume_gateway_url": self.gateway_url,
            "application": {"id": str(APP_ID), "flags": 0},
            "private_channels": [],
            "relationships": [],
        }

    def _guild(self) -> dict[str, Any]:
        members = [
            {
                "user": USERS[uid],
                "roles": ROLES.get(uid, []),
                "joined_at": TS,
                "deaf": False,
                "mute": False,
                "flags": 0,
            }
            for uid in (ALICE, BOB)
        ]
        return {
            "id": str(GUILD_ID),
            "name": "Test Guild",
            "unavailable": False,
            "member_count": 3,
            "owner_id": str(ALICE),
            "roles": [role(GUILD_ID, "@everyone"), role(ONCALL_ROLE, "oncall")],
            "channels": list(self.channels.values()),
            "threads": list(self.threads.values()),
            "members": members,
            "emojis": [],
            "stickers": [],
            "features": [],
            "large": False,
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "premium_tier": 0,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "nsfw_level": 0,
            "afk_timeout": 300,
            "preferred_locale": "en-US",
            "joined_at": TS,
            "system_channel_flags": 0,
        }

    async def _on_op(self, ws: web.WebSocketResponse, op: int, data: Any) -> None:
        self.ops.append(op)
        if op == 1:
            await self._send_raw({"op": 11, "d": None}, ws)
        elif op == 2:
            await self._dispatch("READY", self._ready(), ws)
            await self._dispatch("GUILD_CREATE", self._guild(), ws)
        elif op == 6:
            self.resumes.append(data)
            for seq, frame in list(self.events):
                if seq > (data.get("seq") or 0):
                    await self._send_raw(frame, ws)
            self._seq += 1
            await self._send_raw({"op": 0, "t": "RESUMED", "s": self._seq, "d": {}}, ws)

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.append(ws)
        await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 41_250}}))
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                break
            frame = json.loads(msg.data)
            await self._on_op(ws, frame["op"], frame.get("d"))
        self._sockets.remove(ws)
        return ws

    # --- REST -----------------------------------------------------------------------------------------------
    async def _body(self, request: web.Request) -> tuple[Any, dict[str, bytes]]:
        if not request.can_read_body:
            return None, {}
        if request.content_type.startswith("multipart/"):
            body: Any = None
            files: dict[str, bytes] = {}
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                if part.name == "payload_json":
                    body = json.loads(await part.text())  # type: ignore[union-attr]
                else:
                    files[part.filename or part.name or "file"] = await part.read()  # type: ignore[union-attr]
            return body, files
        raw = await request.read()
        return (json.loads(raw) if raw else None), {}

    def _fault(self, method: str, path: str) -> web.Response | None:
        for i, (m, suffix, status, after) in enumerate(self.faults):
            if m == method and path.endswith(suffix):
                del self.faults[i]
                if status == 429:
                    body = {"message": "You are being rate limited.", "retry_after": after, "global": False}
                    return respond(body, 429, {"Via": "1.1 google", "X-RateLimit-Scope": "user"})
                return respond({"message": "Missing Permissions", "code": 50013}, status)
        return None

    async def _rest(self, request: web.Request) -> web.Response:
        path = "/" + request.match_info["path"]
        body, files = await self._body(request)
        self.requests.append((request.method, path, body))
        if self.token is not None and request.headers.get("Authorization") != f"Bot {self.token}":
            return respond({"message": "401: Unauthorized", "code": 0}, 401)
        fault = self._fault(request.method, path)
        if fault is not None:
            return fault
        parts = path.strip("/").split("/")
        if request.method == "GET" and len(parts) == 3 and parts[0] == "channels" and parts[2] == "messages":
            return self._listed(int(parts[1]), int(request.query.get("after", "0")),
                                int(request.query.get("limit", "50")))
        return await self._route(request.method, parts, body, files)

    def _listed(self, cid: int, after: int, limit: int) -> web.Response:
        """GET /channels/{id}/messages?after=: the bot's messages there, newest first (as Discord)."""
        if not self._known(cid):
            return respond({"message": "Unknown Channel", "code": 10003}, 404)
        found = [self._message(p.channel, p.id, p.content) for p in self.posted if p.channel == cid and p.id > after]
        return respond(list(reversed(found))[:limit])

    def hold_posts(self) -> None:
        """Messages the bot creates from now on are created (in their channel) but answered only after
        `release_posts()` (at most 30 s): a moment to kill the bot before it hears back."""
        self.held_posts = threading.Event()

    def release_posts(self) -> None:
        if self.held_posts is not None:
            self.held_posts.set()
            self.held_posts = None

    async def _route(self, method: str, parts: list[str], body: Any, files: dict[str, bytes]) -> web.Response:
        match (method, parts):
            case ("GET", ["users", "@me"]):
                return respond(user(BOT_ID, "yokebot", bot=True))
            case ("GET", ["oauth2", "applications", "@me"]):
                return respond(
                    {
                        "id": str(APP_ID),
                        "name": "yokebot",
                        "icon": None,
                        "description": "",
                        "bot_public": True,
                        "bot_require_code_grant": False,
                        "verify_key": "0" * 64,
                        "owner": user(ALICE, "alice"),
                        "flags": 0,
                    }
                )
            case ("GET", ["gateway"]) | ("GET", ["gateway", "bot"]):
                return respond(
                    {
                        "url": self.gateway_url,
                        "shards": 1,
                        "session_start_limit": {
                            "total": 1000,
                            "remaining": 1000,
                            "reset_after": 0,
                            "max_concurrency": 1,
                        },
                    }
                )
            case ("GET", ["users", "@me", "guilds"]):  # a bot that posts over REST only finds channels by name
                return respond([{"id": str(GUILD_ID), "name": "Test Guild", "icon": None, "owner": False,
                                 "permissions": "0", "features": []}])
            case ("GET", ["guilds", gid, "channels"]):
                return respond(list(self.channels.values()) if int(gid) == GUILD_ID else [])
            case ("GET", ["guilds", gid, "members", uid]):
                return self._member(int(gid), int(uid))
            case ("GET", ["channels", cid]):
                return self._get_channel(int(cid))
            case ("POST", ["channels", cid, "typing"]):
                self.typing.append(int(cid))
                return web.Response(status=204)
            case ("POST", ["channels", cid, "messages"]):
                if not self._known(int(cid)):
                    return respond({"message": "Unknown Channel", "code": 10003}, 404)
                if len((body or {}).get("content") or "") > 2000:
                    return too_long()
                created = self._create_message(int(cid), body or {}, files)
                if (gate := self.held_posts) is not None:  # created, but its answer is late
                    await asyncio.to_thread(gate.wait, 30)
                return respond(created)
            case ("DELETE" | "PATCH", ["channels", _cid, "messages", mid]) if int(mid) in self.gone:
                return respond({"message": "Unknown Message", "code": 10008}, 404)
            case ("DELETE", ["channels", cid, "messages", mid]):
                self.deleted.append((int(cid), int(mid)))
                return web.Response(status=204)
            case ("PATCH", ["channels", cid, "messages", mid]):
                self.edits.append((int(cid), int(mid), (body or {}).get("content", "")))
                return respond(self._message(int(cid), int(mid), (body or {}).get("content", "")))
            case ("PUT", ["channels", cid, "messages", mid, "reactions", emoji, "@me"]):
                self.reactions.append((int(cid), int(mid), emoji))
                return web.Response(status=204)
            case ("POST", ["interactions", iid, _token, "callback"]):
                started = self._clicked.get(int(iid), time.perf_counter())
                payload = body or {}
                answer = Callback(int(iid), int(payload.get("type", 0)), payload.get("data") or {},
                                  time.perf_counter() - started)
                self.callbacks.append(answer)
                # discord.py asks `?with_response=true`: Discord then answers with the callback object
                return respond({"interaction": {"id": iid, "type": 3, "response_message_loading": False,
                                                "response_message_ephemeral": answer.ephemeral},
                                "resource": {"type": answer.type}})
            case ("PUT", ["applications", _app, "commands"]):
                return self._registered("global", body)
            case ("PUT", ["applications", _app, "guilds", gid, "commands"]):
                return self._registered(gid, body)
            case ("GET", ["applications", _app, "commands"]):
                return respond(self.app_commands.get("global", []))
            case ("GET", ["applications", _app, "guilds", gid, "commands"]):
                return respond(self.app_commands.get(gid, []))
            case (_, ["webhooks", _app, token, *rest]):
                return self._webhook(method, token, rest, body)
            case ("POST", ["channels", cid, "messages", mid, "threads"]):
                if int(mid) in self.threads:  # as Discord: one thread per message
                    return respond({"message": "A thread has already been created for this message",
                                    "code": 160004}, 400)
                return respond(await self._create_thread(int(cid), int(mid), body or {}), 201)
            case _:
                return respond({"message": "404: Not Found", "code": 0}, 404)

    def _member(self, gid: int, uid: int) -> web.Response:
        if gid != GUILD_ID or uid not in USERS:
            return respond({"message": "Unknown Member", "code": 10007}, 404)
        return respond(
            {
                "user": USERS[uid],
                "roles": ROLES.get(uid, []),
                "joined_at": TS,
                "deaf": False,
                "mute": False,
                "flags": 0,
            }
        )

    def _known(self, cid: int) -> bool:
        return cid in self.channels or cid in self.threads or cid == DM_CHANNEL

    def _get_channel(self, cid: int) -> web.Response:
        found = self.channels.get(cid) or self.threads.get(cid)
        if found is None:
            return respond({"message": "Unknown Channel", "code": 10003}, 404)
        return respond(found)

    def _message(self, cid: int, mid: int, content: str) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": str(mid),
            "channel_id": str(cid),
            "author": user(BOT_ID, "yokebot", bot=True),
            "content": content,
            "timestamp": TS,
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
        }
        if cid in self.channels or cid in self.threads:
            data["guild_id"] = str(GUILD_ID)
        return data

    def _create_message(self, cid: int, body: dict[str, Any], files: dict[str, bytes]) -> dict[str, Any]:
        mid = self.new_id()
        self.posted.append(Posted(cid, mid, body.get("content") or "", body, files))
        return self._message(cid, mid, body.get("content") or "")

    async def _create_thread(self, cid: int, mid: int, body: dict[str, Any]) -> dict[str, Any]:
        thread = {
            "id": str(mid),
            "type": 11,
            "guild_id": str(GUILD_ID),
            "parent_id": str(cid),
            "owner_id": str(BOT_ID),
            "name": body.get("name", "thread"),
            "last_message_id": None,
            "rate_limit_per_user": 0,
            "message_count": 0,
            "member_count": 1,
            "flags": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": TS,
                "locked": False,
            },
        }
        self.threads[mid] = thread
        await self._dispatch("THREAD_CREATE", {**thread, "newly_created": True})
        return thread
