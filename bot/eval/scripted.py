"""The scripted model of `yokebot eval --scripted`: an OpenAI-compatible HTTP server on 127.0.0.1 that
plays each scenario's `script:`, spoken to by the real openai SDK through the app's usual model client.

It is deterministic and knows nothing of tools: the runner hands it each scenario's conversation before the
turn, and it answers the n-th request of that conversation with the n-th step (a `mode: plan` turn's
planning call is a step like any other). The tools, the sandbox, notify and the audit
are the real ones, so a broken profile or sandbox shows up in the grades exactly as with a real model."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from bot.eval.scenario import ScriptStep

USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}  # per call, so reports are stable


@dataclass(frozen=True, slots=True)
class Conversation:
    message: str  # the user message (or schedule prompt) that opens the scenario's turn
    steps: tuple[ScriptStep, ...]
    root: str  # replaces {root} in arguments and replies


def _belongs(messages: list[dict[str, Any]], opener: str) -> bool:
    """The request is part of the scenario's turn: a user message is, or quotes, its opening message."""
    return any(m.get("role") == "user" and opener in str(m.get("content") or "") for m in messages)


def _last_result(messages: list[dict[str, Any]]) -> str:
    results = [str(m.get("content") or "") for m in messages if m.get("role") == "tool"]
    return results[-1] if results else ""


def _fill(value: Any, root: str) -> Any:
    if isinstance(value, str):
        return value.replace("{root}", root)
    if isinstance(value, list):
        return [_fill(v, root) for v in value]  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, dict):
        return {k: _fill(v, root) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    return value


def reply_for(conv: Conversation, index: int, last_result: str) -> dict[str, Any]:
    if index >= len(conv.steps):
        return {"role": "assistant", "content": "(the scenario's script has no more steps)"}
    step = conv.steps[index]
    if step.reply is not None:
        text = step.reply.replace("{root}", conv.root).replace("{result}", last_result)
        return {"role": "assistant", "content": text}
    calls = [
        {"id": f"call_{index}_{n}", "type": "function",
         "function": {"name": name, "arguments": json.dumps(_fill(args, conv.root), sort_keys=True)}}
        for n, (name, args) in enumerate(step.tool_calls())
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


class ScriptedModelServer:
    def __init__(self) -> None:
        self.current: Conversation | None = None
        self.served = 0  # requests of the current conversation answered so far
        self._runner: web.AppRunner | None = None
        self.port = 0

    def begin(self, conversation: Conversation) -> None:
        self.current, self.served = conversation, 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> ScriptedModelServer:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server: Any = site._server  # pyright: ignore[reportPrivateUsage]
        self.port = server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _completions(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        messages: list[dict[str, Any]] = body.get("messages") or []
        conv = self.current
        if conv is None or not _belongs(messages, conv.message):
            error = {"message": "scripted model: no script for this conversation", "type": "invalid_request_error",
                     "code": None, "param": None}
            return web.json_response({"error": error}, status=400)
        message = reply_for(conv, self.served, _last_result(messages))
        self.served += 1
        if body.get("stream"):
            return await self._stream(request, body, message)
        return web.json_response(_completion(body, message))

    async def _stream(self, request: web.Request, body: dict[str, Any], message: dict[str, Any]) -> web.Response:
        """One chunk with the whole message, then the finish and the usage (what a streaming client needs)."""
        done = _completion(body, message)
        delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": n, **c} for n, c in enumerate(message["tool_calls"])]
        base = {"id": done["id"], "object": "chat.completion.chunk", "created": 0, "model": done["model"]}
        chunks: list[dict[str, Any]] = [
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": done["choices"][0]["finish_reason"]}]},
            {**base, "choices": [], "usage": USAGE},
        ]
        text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return web.Response(text=text, content_type="text/event-stream")


def _completion(body: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": USAGE}
