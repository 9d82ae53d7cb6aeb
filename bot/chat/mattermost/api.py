"""Mattermost's REST API v4 over aiohttp: one session per process part, the bot token as a bearer token, JSON
in and out, a 429 waited out (`X-Ratelimit-Reset`, a few times), and a refused call raised as `MattermostError`
(its status and the server's message id). No text is sent from here without passing bot/chat/mattermost/live.py
first: this module only speaks the wire."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, cast

import aiohttp

log = logging.getLogger(__name__)

Json = dict[str, Any]
RATE_LIMIT_RETRIES = 3
TIMEOUT_SECONDS = 30.0


class MattermostError(Exception):
    """Mattermost refused a call (or could not be reached: status 0)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status} {detail}" if status else detail)
        self.status, self.detail = status, detail


def fields(value: object) -> Json:
    """A JSON object of a response or an event (a missing one: empty)."""
    return cast(Json, value) if isinstance(value, Mapping) else {}


def listed(value: object) -> list[Any]:
    return cast(list[Any], value) if isinstance(value, list) else []


class MattermostApi:
    """The REST calls yokebot makes, on `url` (MATTERMOST_URL) with `token`."""

    def __init__(self, url: str, token: str) -> None:
        self.base = url.rstrip("/") + "/api/v4"
        self.url, self.token = url.rstrip("/"), token
        self._session: aiohttp.ClientSession | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS))
        return self._session

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def call(self, method: str, path: str, *, json: object = None, params: Mapping[str, str] | None = None,
                   data: aiohttp.FormData | None = None) -> Any:
        for attempt in range(RATE_LIMIT_RETRIES + 1):
            try:
                async with self.session().request(method, self.base + path, json=json, params=params, data=data,
                                                  headers=self.headers) as resp:
                    if resp.status == 429 and attempt < RATE_LIMIT_RETRIES:
                        wait = float(resp.headers.get("X-Ratelimit-Reset") or 1)
                        await asyncio.sleep(min(max(wait, 0.1), 10.0))
                        continue
                    body: Any = await resp.json(content_type=None) if resp.content_length != 0 else None
                    if resp.status >= 400:
                        detail = fields(body).get("id") or fields(body).get("message") or resp.reason or ""
                        raise MattermostError(resp.status, str(detail))
                    return body
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                raise MattermostError(0, f"cannot reach Mattermost at {self.url} ({type(exc).__name__})") from None
        raise MattermostError(429, "rate limited")

    # --- who and where --------------------------------------------------------------------------------------
    async def me(self) -> Json:
        return fields(await self.call("GET", "/users/me"))

    async def my_channels(self) -> list[Json]:
        return [fields(c) for c in listed(await self.call("GET", "/users/me/channels"))]

    async def channel(self, channel_id: str) -> Json:
        return fields(await self.call("GET", f"/channels/{channel_id}"))

    async def teams_of(self, user_id: str) -> list[Json]:
        return [fields(t) for t in listed(await self.call("GET", f"/users/{user_id}/teams"))]

    async def posts_since(self, channel_id: str, since_ms: int) -> list[Json]:
        """The channel's posts created or changed since `since_ms`, oldest first."""
        found = fields(await self.call("GET", f"/channels/{channel_id}/posts", params={"since": str(since_ms)}))
        posts = fields(found.get("posts"))
        return sorted((fields(p) for p in posts.values()), key=lambda p: int(p.get("create_at") or 0))

    async def thread(self, root_id: str) -> list[Json]:
        return [fields(p) for p in fields(fields(await self.call("GET", f"/posts/{root_id}/thread"))
                                          .get("posts")).values()]

    # --- posts (callers: live.py, the one gate) -------------------------------------------------------------
    async def create_post(self, body: Json) -> Json:
        return fields(await self.call("POST", "/posts", json=body))

    async def patch_post(self, post_id: str, body: Json) -> Json:
        return fields(await self.call("PUT", f"/posts/{post_id}/patch", json=body))

    async def delete_post(self, post_id: str) -> None:
        await self.call("DELETE", f"/posts/{post_id}")

    async def upload(self, channel_id: str, name: str, content: bytes) -> str:
        form = aiohttp.FormData()
        form.add_field("channel_id", channel_id)
        form.add_field("files", content, filename=name, content_type="text/markdown")
        infos = listed(fields(await self.call("POST", "/files", data=form)).get("file_infos"))
        return str(fields(infos[0]).get("id")) if infos else ""

    # --- marks ----------------------------------------------------------------------------------------------
    async def react(self, user_id: str, post_id: str, emoji: str, remove: bool = False) -> None:
        if remove:
            await self.call("DELETE", f"/users/{user_id}/posts/{post_id}/reactions/{emoji}")
        else:
            await self.call("POST", "/reactions", json={"user_id": user_id, "post_id": post_id, "emoji_name": emoji})

    async def typing(self, user_id: str, channel_id: str, parent_id: str) -> None:
        await self.call("POST", f"/users/{user_id}/typing", json={"channel_id": channel_id, "parent_id": parent_id})
