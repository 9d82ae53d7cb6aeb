"""Helpers for the alert tests: `yokebot run` in a task, webhook posts, recorded payloads, waiting for the desk."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp

from bot.runner import serve
from tests.helpers import db_rows, eventually, write_agent

PAYLOADS = Path(__file__).parent / "payloads"
TOKEN = "hook-token-0123456789"
SLACK_TOKENS = {"slack_bot_token": "xoxb-alerts-bot-token", "slack_app_token": "xapp-alerts-app-token"}
ROOT_CHANNEL = "C_OPS_ALERTS"


def payload(name: str) -> dict[str, Any]:
    return json.loads((PAYLOADS / f"{name}.json").read_text())


def ops_agent(agents: Path, post_to: str = "slack:#ops-alerts", extra: str = "") -> None:
    write_agent(agents, "ops", f"""
description: on call
tools: [current_time]
alerts:
  - match: {{severity: "~critical|warning"}}
    post_to: "{post_to}"
    prompt: Start with the {{labels.service}} service.
    cooldown: 1h
{extra}""", body="You are the on-call agent.")


class Served:
    """serve() in a task; `stop()` sets its stop event and waits for a clean exit."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.event = asyncio.Event()
        self.task = asyncio.create_task(serve(settings, self.event))

    async def stop(self) -> None:
        self.event.set()
        await asyncio.wait_for(self.task, timeout=30)


async def hook(settings: Any, path: str, body: Any, token: str | None = TOKEN,
               raw: bytes | None = None) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = raw if raw is not None else json.dumps(body).encode()
    async with aiohttp.ClientSession() as http, http.post(
            f"http://127.0.0.1:{settings.http_port}{path}", data=data, headers=headers) as resp:
        try:
            return resp.status, await resp.json(content_type=None)
        except ValueError:
            return resp.status, {"text": await resp.text()}


async def up(settings: Any) -> None:
    async def ok() -> bool:
        try:
            async with aiohttp.ClientSession() as http, http.get(
                    f"http://127.0.0.1:{settings.http_port}/healthz") as resp:
                return resp.status == 200
        except aiohttp.ClientError:
            return False

    await eventually(ok, timeout=30, what="yokebot run to listen")


async def processed(db: str, count: int) -> None:
    """Wait until `count` webhook bodies are stored and every one is processed."""
    async def done() -> bool:
        rows = await db_rows(db, "SELECT state FROM alert_notifications")
        return len(rows) == count and all(r.state == "done" for r in rows)

    await eventually(done, timeout=30, what=f"{count} alert notifications processed")
