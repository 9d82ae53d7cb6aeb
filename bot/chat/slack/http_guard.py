"""An aiohttp middleware in front of `/slack/events`: a body that is not a Slack payload (invalid JSON, a
JSON list, a `payload=` form field that is not a JSON object) gets 400 with one sentence, where Bolt's body
parser raised and aiohttp answered 500. It runs before Bolt's signature check; a well-formed body still
goes to Bolt, which answers 401 for a bad signature."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def body_problem(body: str, content_type: str) -> str | None:
    """None when Bolt can parse `body` as its parser does (JSON object, or a form), else what is wrong."""
    if not body:
        return None
    if content_type == "application/json" or body.startswith("{"):
        return _object_problem(body, "the body")
    if "payload" in body:
        payload = dict(parse_qsl(body, keep_blank_values=True)).get("payload")
        return None if payload is None else _object_problem(payload, "the payload field")
    return None


def _object_problem(text: str, what: str) -> str | None:
    try:
        value: Any = json.loads(text)
    except (ValueError, RecursionError):
        return f"{what} is not valid JSON"
    return None if isinstance(value, dict) else f"{what} is JSON but not an object"


def slack_body_guard(path: str) -> Any:
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "POST" and request.path == path:
            problem = body_problem(await request.text(), request.content_type)
            if problem is not None:
                log.warning("refused a request to %s: %s", path, problem)
                return web.Response(status=400, text=f"Not a Slack event: {problem}.\n")
        return await handler(request)

    return guard
