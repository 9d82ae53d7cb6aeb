"""A fake Mattermost: the REST API v4 endpoints yokebot uses and the WebSocket event stream
(`/api/v4/websocket`), on 127.0.0.1, spoken to by yokebot's own aiohttp client over real sockets.

REST: `users/me` (401 with a bad token), the bot's channels, a channel's posts `since` a time, a thread, posts
(create, patch, delete), reactions, typing, files (upload multipart, download with the bearer token only).
WebSocket: the `authentication_challenge`, `hello`, then a `posted` event for every post created (people's and
the bot's own, as Mattermost does). `drop()` closes every connection and, until `resume()`, new posts are
stored but not pushed (the bot must catch up over REST). `click()` is Mattermost calling an interactive
button's integration URL with the context it keeps for that button, and applying the `update` it gets back.
Everything the bot does is recorded: `requests`, `posts`, `edits`, `deleted`, `reactions`, `uploads`."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import WSMsgType, web

from tests.fakes.loopback import LoopbackServer


def mmid(name: str) -> str:
    """A Mattermost ID: 26 lower-case letters and digits."""
    return (name.lower() + "0" * 26)[:26]


TOKEN = "botaccesstoken0123456789ab"  # a test token
BOT = mmid("yokebot")
TEAM = mmid("teamops")
OTHER_TEAM = mmid("teamsales")
TOWN = mmid("chtownsquare")  # an open channel the bot is in
OPS_ALERTS = mmid("chopsalerts")  # where notify posts
DM = mmid("chdmalice")  # Alice's direct channel with the bot
ALICE = mmid("alice")
BOB = mmid("bob")
CAROL = mmid("carol")  # in the other team only
OTHER_BOT = mmid("otherbot")

USERS = {
    BOT: {"id": BOT, "username": "yokebot", "is_bot": True},
    ALICE: {"id": ALICE, "username": "alice"},
    BOB: {"id": BOB, "username": "bob"},
    CAROL: {"id": CAROL, "username": "carol"},
    OTHER_BOT: {"id": OTHER_BOT, "username": "otherbot", "is_bot": True},
}
TEAMS_OF = {ALICE: [TEAM], BOB: [TEAM], CAROL: [OTHER_TEAM], BOT: [TEAM]}
CHANNELS: dict[str, dict[str, Any]] = {
    TOWN: {"id": TOWN, "team_id": TEAM, "type": "O", "name": "town-square", "display_name": "Town Square"},
    OPS_ALERTS: {"id": OPS_ALERTS, "team_id": TEAM, "type": "O", "name": "ops-alerts", "display_name": "Ops alerts"},
    DM: {"id": DM, "team_id": "", "type": "D", "name": f"{ALICE}__{BOT}", "display_name": ""},
}


@dataclass
class Request:
    method: str
    path: str
    auth: str
    body: Any


@dataclass
class Click:
    """What Mattermost sent to the integration URL and what it got back."""

    status: int
    answer: dict[str, Any] = field(default_factory=lambda: dict[str, Any]())


class FakeMattermost:
    def __init__(self) -> None:
        self.server = LoopbackServer(self._app())
        self.lock = threading.Lock()
        self.held_posts: threading.Event | None = None  # hold_posts(): created posts answered late
        self.ids = itertools.count(1)
        self.clock = itertools.count(int(time.time() * 1000))  # create_at, strictly increasing
        self.requests: list[Request] = []
        self.posts: dict[str, dict[str, Any]] = {}  # every post, by id, as it is now
        self.order: list[str] = []  # post ids in creation order
        self.edits: list[tuple[str, str]] = []  # (post id, message) of every patch
        self.history: dict[str, list[str]] = {}  # post id -> its message as created, then after each patch
        self.deleted: list[str] = []
        self.reactions: list[tuple[str, str, str]] = []  # (op "+"/"-", post id, emoji)
        self.uploads: dict[str, tuple[str, bytes]] = {}  # file id -> (name, bytes)
        self.files: dict[str, tuple[str, bytes]] = {}  # files people attached: file id -> (name, bytes)
        self.sockets: list[web.WebSocketResponse] = []
        self.connects = 0  # authenticated WebSocket connections so far
        self.paused = False  # posts are stored, not pushed (a connection lost)
        self.token = TOKEN
        self.command_answers: list[tuple[str, Any, str]] = []  # (trigger id, body, Authorization) at response_urls

    # --- the test's side ------------------------------------------------------------------------------
    def start(self) -> FakeMattermost:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()

    @property
    def url(self) -> str:
        return self.server.url

    def bot_posts(self, channel: str | None = None, root: str | None = None) -> list[dict[str, Any]]:
        """The bot's posts still there, in order (optionally in one channel / one thread)."""
        with self.lock:
            found = [self.posts[i] for i in self.order if i in self.posts and self.posts[i]["user_id"] == BOT]
        return [p for p in found if (channel is None or p["channel_id"] == channel)
                and (root is None or p["root_id"] == root)]

    def shown(self, post_id: str) -> list[str]:
        """Every text a post showed: as created, then after each edit."""
        with self.lock:
            return list(self.history.get(post_id, []))

    def messages(self, channel: str | None = None, root: str | None = None) -> list[str]:
        return [p["message"] for p in self.bot_posts(channel, root)]

    def say(self, text: str, *, user: str = ALICE, channel: str = TOWN, root: str = "",
            files: dict[str, bytes] | None = None) -> str:
        """A person posts `text` (write `@yokebot` in it to mention the bot); returns the post's id."""
        file_ids: list[str] = []
        for name, data in (files or {}).items():
            fid = f"file{next(self.ids):022d}"
            self.files[fid] = (name, data)
            file_ids.append(fid)
        post = self._store(user, channel, text, root, file_ids, {"from_bot": "true"} if USERS[user].get("is_bot") else {})
        self.server.call(self._push(post))
        return str(post["id"])

    def mention(self, text: str, **kw: Any) -> str:
        return self.say(f"@yokebot {text}", **kw)

    def dm(self, text: str, **kw: Any) -> str:
        return self.say(text, channel=DM, **kw)

    def drop(self) -> None:
        """The connection is lost: every socket closed; until `resume()`, new connections are refused and posts
        are stored but not pushed."""
        self.paused = True
        self.server.call(self._close_all())

    def resume(self) -> None:
        self.paused = False

    async def click(self, post_id: str, action: str, user: str, *, secret: str | None = None) -> Click:
        """Mattermost calls the button's integration URL (from the caller's loop): the context it keeps for the
        button, the clicking user and the post; an `update` in the answer replaces the post's message and props.
        `secret`: send this one instead of the context's (a forged click)."""
        with self.lock:
            post = self.posts[post_id]
            button = next(a for att in post["props"]["attachments"] for a in att.get("actions", [])
                          if a["id"] == action)
        integration = button["integration"]
        context = dict(integration["context"])
        if secret is not None:
            context["secret"] = secret
        body = {"user_id": user, "user_name": USERS[user]["username"], "channel_id": post["channel_id"],
                "team_id": CHANNELS[post["channel_id"]]["team_id"], "post_id": post_id, "trigger_id": "t",
                "type": "", "data_source": "", "context": context}
        async with aiohttp.ClientSession() as http, http.post(integration["url"], json=body) as resp:
            answer = await resp.json(content_type=None)
        update = answer.get("update") if isinstance(answer, dict) else None
        if isinstance(update, dict):
            with self.lock:
                if "message" in update:
                    post["message"] = update["message"]
                if "props" in update:
                    post["props"] = update["props"]
        return Click(resp.status, answer if isinstance(answer, dict) else {})

    async def slash(self, url: str, text: str, *, user: str = ALICE, channel: str = TOWN, token: str = "",
                    root: str = "") -> tuple[int, Any, str]:
        """Someone types `/yokebot TEXT`: Mattermost POSTs the command's form to its request URL `url` (with
        the command's `token`). Returns the status, the JSON answer and the trigger id."""
        trigger = f"trigger{next(self.ids)}"
        chan = CHANNELS[channel]
        form = {"channel_id": channel, "channel_name": chan["name"], "command": "/yokebot",
                "response_url": f"{self.url}/hooks/commands/{trigger}", "team_domain": "ops",
                "team_id": chan["team_id"] or TEAMS_OF[user][0], "text": text, "token": token, "trigger_id": trigger,
                "user_id": user, "user_name": USERS[user]["username"], **({"root_id": root} if root else {})}
        async with aiohttp.ClientSession() as http, \
                http.post(url, data=form, headers={"Authorization": f"Token {token}"}) as resp:
            body = await resp.json(content_type=None) if resp.content_length else None
            return resp.status, body, trigger

    def answered_privately(self, trigger: str) -> list[str]:
        return [body.get("text", "") for t, body, _ in self.command_answers if t == trigger]

    # --- the server -----------------------------------------------------------------------------------
    def _store(self, user: str, channel: str, message: str, root: str, file_ids: list[str],
               props: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            known = {**self.files, **self.uploads}
            now = next(self.clock)
            pid = f"post{next(self.ids):022d}"
            post = {"id": pid, "create_at": now, "update_at": now, "edit_at": 0, "delete_at": 0, "user_id": user,
                    "channel_id": channel, "root_id": root, "message": message, "type": "", "props": props,
                    "file_ids": file_ids, "metadata": {"files": [
                        {"id": f, "name": known[f][0], "size": len(known[f][1]), "mime_type": "text/plain"}
                        for f in file_ids]} if file_ids else {}}
            self.posts[pid] = post
            self.history[pid] = [message]
            self.order.append(pid)
            return post

    async def _push(self, post: dict[str, Any]) -> None:
        if self.paused:
            return
        channel = CHANNELS[post["channel_id"]]
        mentioned = [BOT] if "@yokebot" in post["message"].lower() else []
        data = {"channel_display_name": channel["display_name"], "channel_name": channel["name"],
                "channel_type": channel["type"], "post": json.dumps(post), "sender_name": "@" +
                USERS[post["user_id"]]["username"], "team_id": channel["team_id"]}
        if mentioned:
            data["mentions"] = json.dumps(mentioned)
        event = {"event": "posted", "data": data, "broadcast": {"channel_id": post["channel_id"]}, "seq": 0}
        for ws in list(self.sockets):
            if not ws.closed:
                await ws.send_str(json.dumps(event))

    async def _close_all(self) -> None:
        for ws in list(self.sockets):
            await ws.close()
        self.sockets.clear()

    def _app(self) -> web.Application:
        app = web.Application(middlewares=[self._auth])
        r = app.router
        r.add_get("/api/v4/websocket", self._websocket)
        r.add_get("/api/v4/users/me", self._me)
        r.add_get("/api/v4/users/{user}/channels", self._my_channels)
        r.add_get("/api/v4/users/{user}/teams", self._teams)
        r.add_get("/api/v4/channels/{channel}", self._channel)
        r.add_get("/api/v4/channels/{channel}/posts", self._since)
        r.add_get("/api/v4/posts/{post}/thread", self._thread)
        r.add_post("/api/v4/posts", self._create)
        r.add_put("/api/v4/posts/{post}/patch", self._patch)
        r.add_delete("/api/v4/posts/{post}", self._delete)
        r.add_post("/api/v4/reactions", self._react)
        r.add_delete("/api/v4/users/{user}/posts/{post}/reactions/{emoji}", self._unreact)
        r.add_post("/api/v4/users/{user}/typing", self._typing)
        r.add_post("/api/v4/files", self._upload)
        r.add_get("/api/v4/files/{file}", self._download)
        r.add_post("/hooks/commands/{trigger}", self._command_answer)  # slash commands' response_urls
        return app

    async def _command_answer(self, request: web.Request) -> web.Response:
        with self.lock:
            self.command_answers.append((request.match_info["trigger"], await request.json(),
                                         request.headers.get("Authorization", "")))
        return web.Response(text="ok")

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        body: Any = None
        if request.content_type == "application/json" and request.can_read_body:
            body = await request.json()
        auth = request.headers.get("Authorization", "")
        self.requests.append(Request(request.method, request.path, auth, body))
        if request.path != "/api/v4/websocket" and not request.path.startswith("/hooks/") and \
                auth != f"Bearer {self.token}":
            return web.json_response({"id": "api.context.session_expired.app_error", "message": "Invalid or "
                                      "expired session, please login again.", "status_code": 401}, status=401)
        return await handler(request)

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        if self.paused:  # the server is away: connections are refused until `resume()`
            return web.json_response({"status_code": 503}, status=503)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        authed = request.headers.get("Authorization") == f"Bearer {self.token}"
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                break
            data = json.loads(msg.data)
            if data.get("action") == "authentication_challenge":
                authed = authed or data.get("data", {}).get("token") == self.token
                if not authed:
                    await ws.close()
                    break
                await ws.send_str(json.dumps({"status": "OK", "seq_reply": data.get("seq")}))
                await ws.send_str(json.dumps({"event": "hello", "data": {"server_version": "10.5.0"},
                                              "broadcast": {"user_id": BOT}, "seq": 0}))
                self.connects += 1
                self.sockets.append(ws)
        return ws

    async def _me(self, request: web.Request) -> web.Response:
        return web.json_response(USERS[BOT])

    async def _typing(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "OK"})

    async def _my_channels(self, request: web.Request) -> web.Response:
        return web.json_response(list(CHANNELS.values()))

    async def _teams(self, request: web.Request) -> web.Response:
        user = request.match_info["user"]
        user = BOT if user == "me" else user
        return web.json_response([{"id": t, "name": t} for t in TEAMS_OF.get(user, [])])

    async def _channel(self, request: web.Request) -> web.Response:
        found = CHANNELS.get(request.match_info["channel"])
        return web.json_response(found) if found else web.json_response({"status_code": 404}, status=404)

    async def _since(self, request: web.Request) -> web.Response:
        channel, since = request.match_info["channel"], int(request.query.get("since", "0"))
        with self.lock:
            found = {i: p for i, p in self.posts.items() if p["channel_id"] == channel and p["update_at"] >= since}
        return web.json_response({"order": sorted(found, key=lambda i: -found[i]["create_at"]), "posts": found})

    async def _thread(self, request: web.Request) -> web.Response:
        root = request.match_info["post"]
        with self.lock:
            found = {i: p for i, p in self.posts.items() if i == root or p["root_id"] == root}
        return web.json_response({"order": list(found), "posts": found})

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        if len(body.get("message", "")) > 16383:
            return web.json_response({"id": "model.post.is_valid.msg.app_error", "status_code": 400}, status=400)
        post = self._store(BOT, body["channel_id"], body.get("message", ""), body.get("root_id") or "",
                           list(body.get("file_ids") or []), {**(body.get("props") or {}), "from_bot": "true"})
        await self._push(post)
        if (gate := self.held_posts) is not None:  # created, but its answer is late
            await asyncio.to_thread(gate.wait, 30)
        return web.json_response(post, status=201)

    def hold_posts(self) -> None:
        """Posts the bot creates from now on are created (in their thread) but answered only after
        `release_posts()` (at most 30 s): a moment to kill the bot before it hears back."""
        self.held_posts = threading.Event()

    def release_posts(self) -> None:
        if self.held_posts is not None:
            self.held_posts.set()
            self.held_posts = None

    async def _patch(self, request: web.Request) -> web.Response:
        body, pid = await request.json(), request.match_info["post"]
        with self.lock:
            post = self.posts.get(pid)
            if post is None:
                return web.json_response({"status_code": 404}, status=404)
            if "message" in body:
                if len(body["message"]) > 16383:
                    return web.json_response({"status_code": 400}, status=400)
                post["message"] = body["message"]
                self.edits.append((pid, body["message"]))
                self.history[pid].append(body["message"])
            if "props" in body:
                post["props"] = body["props"]
            post["update_at"] = post["edit_at"] = next(self.clock)
        return web.json_response(post)

    async def _delete(self, request: web.Request) -> web.Response:
        pid = request.match_info["post"]
        with self.lock:
            if self.posts.pop(pid, None) is None:
                return web.json_response({"status_code": 404}, status=404)
            self.deleted.append(pid)
        return web.json_response({"status": "OK"})

    async def _react(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.reactions.append(("+", body["post_id"], body["emoji_name"]))
        return web.json_response(body, status=201)

    async def _unreact(self, request: web.Request) -> web.Response:
        self.reactions.append(("-", request.match_info["post"], request.match_info["emoji"]))
        return web.json_response({"status": "OK"})

    async def _upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        infos: list[dict[str, Any]] = []
        for value in form.getall("files"):
            assert isinstance(value, web.FileField)
            fid = f"file{next(self.ids):022d}"
            self.uploads[fid] = (value.filename, value.file.read())
            infos.append({"id": fid, "name": value.filename})
        return web.json_response({"file_infos": infos}, status=201)

    async def _download(self, request: web.Request) -> web.Response:
        found = self.files.get(request.match_info["file"]) or self.uploads.get(request.match_info["file"])
        if found is None:
            return web.json_response({"status_code": 404}, status=404)
        return web.Response(body=found[1], content_type="text/plain")
