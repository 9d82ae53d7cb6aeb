"""A yokebot with its Slack adapter, wired to the fake Slack and the fake OpenAI, in Socket Mode or HTTP mode.

`deliver()` sends an event the way Slack would in that mode: an envelope over the websocket, or a signed
POST to /slack/events on a real aiohttp server."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bot.app import App, build_app
from bot.chat.slack.adapter import EVENTS_PATH, SlackAdapter
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import BOT_USER, FakeSlack, event_callback, sign
from tests.helpers import build_slack, eventually, registry

SECRET = "test-signing-secret-123"


@dataclass
class SlackBot:
    app: App
    adapter: SlackAdapter
    fake: FakeSlack
    mode: str
    http_runner: web.AppRunner | None = None
    events_url: str = ""
    http_statuses: list[int] = field(default_factory=list)

    async def deliver(self, payload: dict[str, Any], retry: int = 0) -> None:
        if self.mode == "socket":
            self.fake.push(payload, retry_attempt=retry, retry_reason="timeout" if retry else "")
        else:
            status, _ = await self.post(payload, retry=retry)
            self.http_statuses.append(status)

    async def post(
        self, payload: dict[str, Any], retry: int = 0, secret: str = SECRET, timestamp: int | None = None
    ) -> tuple[int, str]:
        body = json.dumps(payload)
        headers = sign(secret, body, timestamp)
        if retry:
            headers.update({"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"})
        async with (
            aiohttp.ClientSession() as session,
            session.post(self.events_url, data=body, headers=headers) as resp,
        ):
            return resp.status, await resp.text()

    async def wait_acked(self, n: int) -> None:
        if self.mode == "socket":
            await eventually(lambda: len(self.fake.acks) >= n, what=f"{n} acks")

    async def stop(self) -> None:
        await self.adapter.stop()
        if self.http_runner is not None:
            await self.http_runner.cleanup()
        await self.app.close()


async def start_bot(
    fake: FakeSlack, llm: FakeOpenAI, db: str, agents: Path, mode: str = "socket", **overrides: Any
) -> SlackBot:
    tokens: dict[str, Any] = {"slack_bot_token": "xoxb-test-bot-token", "slack_api_url": fake.api_url}
    if mode == "socket":
        tokens["slack_app_token"] = "xapp-test-app-token"
    else:
        tokens["slack_signing_secret"] = SECRET
    settings = make_settings(db, llm, agents, **{**tokens, **overrides})
    app = await build_app(settings, registry=registry())
    adapter = build_slack(app)
    assert adapter is not None
    bot = SlackBot(app, adapter, fake, mode)
    if mode == "http":
        http = web.Application()
        adapter.mount(http)
        bot.http_runner = web.AppRunner(http)
        await bot.http_runner.setup()
        site = web.TCPSite(bot.http_runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        bot.events_url = f"http://127.0.0.1:{port}{EVENTS_PATH}"
    connections = fake.connections
    await adapter.start()
    if mode == "socket":
        await eventually(lambda: fake.connections > connections, what="the Socket Mode connection")
    return bot


ALICE, MALLORY = "U_ALICE", "U_MALLORY"
OPS = "C_OPS"





def mention(
    text: str,
    ts: str,
    channel: str = OPS,
    user: str = ALICE,
    thread_ts: str | None = None,
    event_id: str | None = None,
) -> dict:
    event = {
        "type": "app_mention",
        "user": user,
        "text": f"<@{BOT_USER}> {text}",
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event_callback(event, event_id)


def message(text: str, ts: str, channel: str, user: str = ALICE, **extra: object) -> dict:
    event = {
        "type": "message",
        "user": user,
        "text": text,
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "channel_type": "im" if channel.startswith("D") else "channel",
        **extra,
    }
    return event_callback(event)


async def answered(fake: FakeSlack, ts: str, emoji: str = "white_check_mark") -> None:
    await eventually(lambda: ("reactions.add", emoji) in fake.reactions(ts), what=f":{emoji}: on {ts}")
