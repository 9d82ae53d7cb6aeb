"""A fake Slack on 127.0.0.1: the Web API methods yokebot uses, the files.uploadV2 upload URL, and a Socket
Mode websocket that pushes envelopes and records acks. The real slack_sdk / slack_bolt talk to it.

Every Web API call is recorded in `calls` as `Call(method, params)`; `fail(method, ...)` scripts failures
(a 429 with Retry-After, or `{"ok": false, "error": ...}`)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
import json
import sys
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import yarl
from aiohttp import WSMsgType, web

from tests.fakes.loopback import LoopbackServer

BOT_USER = "UBOT"
BOT_ID = "BBOT"
TEAM = "T0001"


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    result: dict[str, Any] = field(default_factory=lambda: {})  # what the fake answered (when ok)
    at: float = field(default_factory=time.perf_counter)  # when it arrived (same clock as `ack_times`)

    def __getitem__(self, key: str) -> Any:
        return self.params[key]


@dataclass
class Failure:
    status: int = 200
    error: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


def event_callback(event: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
    """Wrap an event as Slack's Events API does."""
    return {
        "token": "legacy-verification-token",
        "team_id": TEAM,
        "api_app_id": "A0001",
        "type": "event_callback",
        "event": event,
        "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
        "event_time": int(time.time()),
        "event_context": "ctx",
        "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
    }


def block_actions(user: str, action_id: str, value: str, channel: str, message_ts: str,
                  thread_ts: str | None = None) -> dict[str, Any]:
    """The payload Slack sends when someone clicks a button in a message."""
    message: dict[str, Any] = {"type": "message", "ts": message_ts, "user": BOT_USER}
    if thread_ts:
        message["thread_ts"] = thread_ts
    return {
        "type": "block_actions", "team": {"id": TEAM}, "api_app_id": "A0001", "token": "legacy",
        "user": {"id": user, "team_id": TEAM}, "channel": {"id": channel}, "container": {
            "type": "message", "message_ts": message_ts, "channel_id": channel},
        "message": message, "trigger_id": "1.2.3", "response_url": "https://hooks.invalid/actions/1",
        "actions": [{"type": "button", "action_id": action_id, "block_id": f"approval-{value}", "value": value,
                     "action_ts": "1.0"}],
    }


def burst_envelope(envelope_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A first delivery of an events_api envelope, as `FakeSlack.push` sends it."""
    return {
        "envelope_id": envelope_id,
        "type": "events_api",
        "payload": payload,
        "accepts_response_payload": False,
        "retry_attempt": 0,
        "retry_reason": "",
    }


def sign(secret: str, body: str, timestamp: int | None = None) -> dict[str, str]:
    """Headers Slack sends with an HTTP event: `v0=HMAC_SHA256(secret, "v0:{ts}:{body}")`."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": "application/json",
    }


class FakeSlack:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.failures: dict[str, deque[Failure]] = {}
        self.held: dict[str, threading.Event] = {}  # method -> set when its calls may be answered (hold/release)
        self.channels: dict[str, str] = {"C_OPS_ALERTS": "ops-alerts", "C_GENERAL": "general"}
        self.usergroups: dict[str, list[str]] = {"S_ONCALL": ["U_ALICE"]}  # user group ID -> its members
        self.messages: dict[tuple[str, str], list[dict[str, Any]]] = {}  # (channel, thread ts) -> messages
        self.uploads: dict[str, bytes] = {}
        # files served at /files-pri/<name> (url_private_download): bytes and content type; the bot token is
        # checked as Slack does (a wrong or missing one gets the sign-in page, 200 text/html)
        self.files: dict[str, tuple[bytes, str]] = {}
        self.file_token = "xoxb-test-bot-token"
        self.file_gets: list[tuple[str, str | None]] = []  # (path, Authorization header)
        self.acks: list[str] = []
        self.ack_times: dict[str, float] = {}  # envelope_id -> time.perf_counter() when its ack arrived
        self.connections = 0
        self.streaming = True  # False: a workspace without chat.startStream / appendStream / stopStream
        self.streams: dict[str, str] = {}  # ts -> the Markdown a chat stream holds
        self._ts = itertools.count(1)
        self._lock = threading.Lock()
        self._sockets: list[web.WebSocketResponse] = []
        # as Slack does with several Socket Mode connections (one app, several instances): each envelope goes over
        # one of them, in turn; False: over every one (the inbox's claim makes one instance answer it)
        self.spread = False
        self._next_socket = 0
        app = web.Application(client_max_size=32 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_get("/link", self._link)
        app.router.add_get("/files-pri/{name:.*}", self._file)
        app.router.add_post("/commands/{trigger}", self._respond)  # slash commands' response_urls
        self.responses: list[tuple[str, dict[str, Any]]] = []  # (trigger_id, body) posted to a response_url
        self.ack_payloads: dict[str, Any] = {}  # envelope_id -> the payload its ack carried (a command's answer)
        self.server = LoopbackServer(app)

    # --- lifecycle ----------------------------------------------------------------------------------------
    def start(self) -> FakeSlack:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.call(self._close_sockets())
        self.server.stop()

    async def _close_sockets(self) -> None:
        for ws in list(self._sockets):
            await ws.close()

    @property
    def api_url(self) -> str:
        return f"{self.server.url}/api/"

    def file_url(self, name: str) -> str:
        return f"{self.server.url}/files-pri/{name}"

    def serve_file(self, name: str, data: bytes, content_type: str = "text/plain") -> str:
        """Serve `data` at a url_private_download URL; returns it."""
        self.files[name] = (data, content_type)
        return self.file_url(name)

    async def _file(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        self.file_gets.append((name, request.headers.get("Authorization")))
        if request.headers.get("Authorization") != f"Bearer {self.file_token}":
            return web.Response(text="<html>Sign in to Slack</html>", content_type="text/html")
        if name.startswith("redirect/"):  # a redirect within the file host
            raise web.HTTPFound(f"/files-pri/{name.removeprefix('redirect/')}")
        if name.startswith("login/"):  # a redirect to a sign-in page elsewhere
            raise web.HTTPFound("http://login.example.invalid/signin")
        if name not in self.files:
            return web.Response(status=404, text="file not found")
        data, ctype = self.files[name]
        return web.Response(body=data, content_type=ctype)

    # --- scripting and inspection -----------------------------------------------------------------------
    def fail(
        self,
        method: str,
        status: int = 200,
        error: str | None = None,
        retry_after: int | None = None,
        times: int = 1,
    ) -> None:
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        with self._lock:
            queue = self.failures.setdefault(method, deque())
            queue.extend(Failure(status, error, headers) for _ in range(times))

    def hold(self, method: str) -> None:
        """Later calls of `method` are carried out (a post is in its thread) but not answered until
        `release(method)` (at most 30 s): a moment to look at what the bot has done, or to kill it, before that
        call returns."""
        self.held[method] = threading.Event()

    def release(self, method: str) -> None:
        gate = self.held.pop(method, None)
        if gate is not None:
            gate.set()

    def calls_to(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def posts(self, channel: str | None = None, thread_ts: str | None = None) -> list[Call]:
        return [
            c
            for c in self.calls_to("chat.postMessage")
            if (channel is None or c["channel"] == channel)
            and (thread_ts is None or c.params.get("thread_ts") == thread_ts)
        ]

    def reactions(self, ts: str) -> list[tuple[str, str]]:
        """[(method, emoji name)] in order for the message `ts`."""
        return [
            (c.method, c["name"])
            for c in self.calls
            if c.method.startswith("reactions.") and c.params.get("timestamp") == ts
        ]

    def add_thread_message(self, channel: str, thread_ts: str, message: dict[str, Any]) -> None:
        with self._lock:
            self.messages.setdefault((channel, thread_ts), []).append(message)

    def next_ts(self) -> str:
        n = next(self._ts)
        return f"{1_700_000_000 + n}.{n:06d}"

    # --- socket mode ------------------------------------------------------------------------------------
    def push(self, payload: dict[str, Any], retry_attempt: int = 0, retry_reason: str = "") -> str:
        """Send an events_api envelope over every open Socket Mode connection; returns its envelope_id."""
        envelope_id = uuid.uuid4().hex
        envelope = {
            "envelope_id": envelope_id,
            "type": "events_api",
            "payload": payload,
            "accepts_response_payload": False,
            "retry_attempt": retry_attempt,
            "retry_reason": retry_reason,
        }
        self.server.call(self._send_all(json.dumps(envelope)))
        return envelope_id

    def push_interactive(self, payload: dict[str, Any]) -> str:
        """Send an `interactive` envelope (a button click) over every open Socket Mode connection."""
        envelope_id = uuid.uuid4().hex
        envelope = {"envelope_id": envelope_id, "type": "interactive", "payload": payload,
                    "accepts_response_payload": False}
        self.server.call(self._send_all(json.dumps(envelope)))
        return envelope_id

    async def _send_all(self, text: str) -> None:
        if not self._sockets:
            raise RuntimeError("no Socket Mode client is connected")
        if self.spread:
            open_now = [ws for ws in self._sockets if not ws.closed]
            self._next_socket += 1
            await open_now[self._next_socket % len(open_now)].send_str(text)
            return
        for ws in self._sockets:
            await ws.send_str(text)

    async def _link(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        await ws.send_str(
            json.dumps({"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0001"}})
        )
        self._sockets.append(ws)
        self.connections += 1
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    data = json.loads(msg.data)
                    if "envelope_id" in data:
                        with self._lock:
                            self.ack_payloads[data["envelope_id"]] = data.get("payload")
                            self.acks.append(data["envelope_id"])
                            self.ack_times[data["envelope_id"]] = time.perf_counter()
        finally:
            self._sockets.remove(ws)
        return ws

    # --- bursts, for the acknowledgement benchmark (bench/slack_ack.py) ----------------------------------
    def push_burst(self, payloads: list[dict[str, Any]], timeout: float = 20.0, pause_after: int = 0,
                   pause: float = 0.0) -> list[float | None]:
        """Push one envelope per payload, back to back (with `pause` seconds after the first `pause_after`), over
        every Socket Mode connection; per envelope, the seconds from its send to its ack (None when no ack came
        within `timeout`)."""
        return self.server.call(self._push_burst(payloads, timeout, pause_after, pause))

    async def _push_burst(self, payloads: list[dict[str, Any]], timeout: float, pause_after: int = 0,
                          pause: float = 0.0) -> list[float | None]:
        frames = [(eid, json.dumps(burst_envelope(eid, p))) for eid, p in ((uuid.uuid4().hex, p) for p in payloads)]
        sent: dict[str, float] = {}
        for n, (envelope_id, text) in enumerate(frames):
            if pause and n == pause_after:
                await asyncio.sleep(pause)
            sent[envelope_id] = time.perf_counter()
            await self._send_all(text)
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline and not all(eid in self.ack_times for eid in sent):
            await asyncio.sleep(0.005)
        with self._lock:
            return [self.ack_times[eid] - t if eid in self.ack_times else None for eid, t in sent.items()]

    def post_burst(
        self, url: str, secret: str, payloads: list[dict[str, Any]], timeout: float = 20.0
    ) -> list[tuple[int, float]]:
        """POST one signed event per payload to `url`, all at once, each on a connection of its own; per event,
        (the HTTP status, or 0 when it failed; seconds from its connect to the response's status line).
        Plain sockets with prepared bytes, so that the client's own CPU hardly counts in the times."""
        return self.server.call(self._post_burst(url, secret, payloads, timeout))

    async def _post_burst(
        self, url: str, secret: str, payloads: list[dict[str, Any]], timeout: float
    ) -> list[tuple[int, float]]:
        target = yarl.URL(url)
        host, port = target.host or "127.0.0.1", target.port or 80

        def request(payload: dict[str, Any]) -> bytes:
            body = json.dumps(payload)
            head = [f"POST {target.raw_path_qs} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}",
                    "Connection: close", *(f"{k}: {v}" for k, v in sign(secret, body).items())]
            return ("\r\n".join(head) + "\r\n\r\n" + body).encode()

        async def one(data: bytes) -> tuple[int, float]:
            start = time.perf_counter()
            writer: asyncio.StreamWriter | None = None
            try:
                async with asyncio.timeout(timeout):
                    reader, writer = await asyncio.open_connection(host, port)
                    writer.write(data)
                    status = int((await reader.readline()).split()[1])
                return status, time.perf_counter() - start
            except (TimeoutError, OSError, IndexError, ValueError):
                return 0, time.perf_counter() - start
            finally:
                if writer is not None:
                    writer.close()

        return list(await asyncio.gather(*(one(request(p)) for p in payloads)))

    # --- Web API ------------------------------------------------------------------------------------------
    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                params.update(await request.json())
            else:
                params.update(dict(await request.post()))
        return params

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        params["_auth"] = request.headers.get("Authorization", "")
        call = Call(method, params)
        with self._lock:
            self.calls.append(call)
            queue = self.failures.get(method)
            failure = queue.popleft() if queue else None
        if failure is not None:
            if failure.status != 200:
                return web.json_response(
                    {"ok": False, "error": "ratelimited"}, status=failure.status, headers=failure.headers
                )
            return web.json_response({"ok": False, "error": failure.error})
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if method.endswith("Stream") and not self.streaming:
            handler = None
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"}, status=404)
        call.result = handler(params)
        if (gate := self.held.get(method)) is not None:  # done, but its answer is late
            await asyncio.to_thread(gate.wait, 30)
        return web.json_response({"ok": True, **call.result})

    # --- slash commands ---------------------------------------------------------------------------------
    def command(self, text: str, user: str = "U_ALICE", channel: str = "C_OPS", team: str = TEAM,
                trigger_id: str | None = None) -> dict[str, str]:
        """A `/yokebot` slash command's payload, as Slack sends it (a form in HTTP mode, the envelope's payload
        in Socket Mode); its response_url is served here."""
        trigger = trigger_id or f"{next(self._ts)}.{uuid.uuid4().hex[:12]}"
        return {"token": "verification-token", "team_id": team, "team_domain": "fake", "channel_id": channel,
                "channel_name": "directmessage" if channel.startswith("D") else "ops", "user_id": user,
                "user_name": user.lower(), "command": "/yokebot", "text": text, "api_app_id": "A0001",
                "is_enterprise_install": "false", "trigger_id": trigger,
                "response_url": f"http://127.0.0.1:{self.server.port}/commands/{trigger}"}

    def push_command(self, payload: dict[str, str]) -> str:
        """Send a `slash_commands` envelope over every open Socket Mode connection; returns its envelope_id."""
        envelope_id = uuid.uuid4().hex
        envelope = {"envelope_id": envelope_id, "type": "slash_commands", "payload": payload,
                    "accepts_response_payload": True}
        self.server.call(self._send_all(json.dumps(envelope)))
        return envelope_id

    async def _respond(self, request: web.Request) -> web.Response:
        with self._lock:
            self.responses.append((request.match_info["trigger"], await request.json()))
        return web.Response(text="ok")

    def answered_privately(self, trigger_id: str) -> list[str]:
        """What the command `trigger_id` was answered with, to its caller only (response_url, ephemeral)."""
        return [body.get("text", "") for t, body in self.responses if t == trigger_id]

    def _auth_test(self, p: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://fake.slack/",
            "team": "Fake",
            "user": "yokebot",
            "team_id": TEAM,
            "user_id": BOT_USER,
            "bot_id": BOT_ID,
        }

    def _apps_connections_open(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"url": f"ws://127.0.0.1:{self.server.port}/link"}

    def _channel_id(self, channel: str) -> str:
        if channel.startswith("#"):
            by_name = {name: cid for cid, name in self.channels.items()}
            return by_name.get(channel[1:], channel)
        return channel

    def _chat_postMessage(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts = self._channel_id(p["channel"]), self.next_ts()
        message = {"type": "message", "user": BOT_USER, "bot_id": BOT_ID, "text": p.get("text", ""), "ts": ts}
        thread = p.get("thread_ts")
        if thread:
            message["thread_ts"] = thread
            self.add_thread_message(channel, thread, message)
        return {"channel": channel, "ts": ts, "message": message}

    def _chat_update(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"channel": p["channel"], "ts": p["ts"], "text": p.get("text", "")}

    def _chat_postEphemeral(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"message_ts": self.next_ts()}

    def _chat_delete(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"channel": p["channel"], "ts": p["ts"]}

    def _chat_startStream(self, p: dict[str, Any]) -> dict[str, Any]:
        ts = self.next_ts()
        with self._lock:
            self.streams[ts] = p.get("markdown_text", "")
        return {"channel": p["channel"], "ts": ts}

    def _chat_appendStream(self, p: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.streams[p["ts"]] = self.streams.get(p["ts"], "") + p.get("markdown_text", "")
        return {"channel": p["channel"], "ts": p["ts"]}

    def _chat_stopStream(self, p: dict[str, Any]) -> dict[str, Any]:
        return self._chat_appendStream(p)

    def _assistant_threads_setStatus(self, p: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _assistant_threads_setTitle(self, p: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _assistant_threads_setSuggestedPrompts(self, p: dict[str, Any]) -> dict[str, Any]:
        return {}

    def texts(self, ts: str) -> list[str]:
        """What the message `ts` showed, in order: its post or stream start, then each update or append."""
        shown: list[str] = []
        for c in list(self.calls):
            if c.method in ("chat.postMessage", "chat.startStream") and c.result.get("ts") == ts:
                shown.append(c.params.get("text") or c.params.get("markdown_text") or "")
            elif c.method == "chat.update" and c.params.get("ts") == ts and c.result:
                shown.append(c.params.get("text", ""))
            elif c.method in ("chat.appendStream", "chat.stopStream") and c.params.get("ts") == ts and c.result:
                shown.append(shown[-1] + c.params.get("markdown_text", "") if shown else "")
        return shown

    def shown_in_thread(self, channel: str, thread_ts: str) -> list[str]:
        """What a user sees in the thread now, in order: each message posted or streamed into it, with its
        latest text; deleted ones are gone."""
        deleted = {c.params.get("ts") for c in self.calls_to("chat.delete") if c.result}
        shown: list[str] = []
        for c in list(self.calls):
            if c.method not in ("chat.postMessage", "chat.startStream") or not c.result:
                continue
            if self._channel_id(c.params.get("channel", "")) != channel or c.params.get("thread_ts") != thread_ts:
                continue
            ts = str(c.result["ts"])
            if ts not in deleted:
                shown.append(self.texts(ts)[-1])
        return shown

    def _reactions_add(self, p: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _reactions_remove(self, p: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _conversations_replies(self, p: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            msgs = list(self.messages.get((p["channel"], p["ts"]), []))
        return {"messages": msgs, "has_more": False}

    def _conversations_list(self, p: dict[str, Any]) -> dict[str, Any]:
        chans = [
            {"id": cid, "name": name, "is_channel": True, "is_archived": False}
            for cid, name in self.channels.items()
        ]
        return {"channels": chans, "response_metadata": {"next_cursor": ""}}

    def _usergroups_list(self, p: dict[str, Any]) -> dict[str, Any]:
        groups = [{"id": gid, "handle": gid.lower(), "users": list(users)} for gid, users in self.usergroups.items()]
        return {"usergroups": groups}

    def _files_getUploadURLExternal(self, p: dict[str, Any]) -> dict[str, Any]:
        file_id = f"F{uuid.uuid4().hex[:8].upper()}"
        return {"upload_url": f"{self.server.url}/upload/{file_id}", "file_id": file_id}

    def _files_completeUploadExternal(self, p: dict[str, Any]) -> dict[str, Any]:
        files = json.loads(p["files"]) if isinstance(p.get("files"), str) else p.get("files", [])
        return {"files": [{"id": f["id"], "title": f.get("title")} for f in files]}

    async def _upload(self, request: web.Request) -> web.Response:
        data = await request.read()
        with self._lock:
            self.uploads[request.match_info["file_id"]] = data
        return web.Response(text=f"OK - {len(data)}")



def serve_stdio() -> None:
    """`python -m tests.fakes.slack_server`: the fake in a process of its own (bench/slack_ack.py), so its CPU
    never counts against the bot. Prints `READY <api_url>`, then answers one JSON line per request line
    `{"op": "push_burst" | "post_burst" | "count" | "connections" | ..., "args": {...}}` until stdin closes.
    `--spread`: each envelope over one Socket Mode connection, in turn (several instances, as Slack does)."""
    fake = FakeSlack().start()
    fake.spread = "--spread" in sys.argv
    ops: dict[str, Any] = {
        "push_burst": fake.push_burst,
        "post_burst": fake.post_burst,
        "count": lambda method: len(fake.calls_to(method)),
        "connections": lambda: fake.connections,
        "open_connections": lambda: len(fake._sockets),
        # the answers posted so far, in order: (thread_ts, text)
        "answers": lambda: [(c.params.get("thread_ts"), c.params.get("text")) for c in fake.posts()],
    }
    print(f"READY {fake.api_url}", flush=True)
    try:
        for line in sys.stdin:
            request = json.loads(line)
            try:
                reply: dict[str, Any] = {"result": ops[request["op"]](**request.get("args", {}))}
            except Exception as exc:  # the caller reports it
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            print(json.dumps(reply), flush=True)
    finally:
        with contextlib.suppress(Exception):
            fake.stop()


if __name__ == "__main__":
    serve_stdio()
