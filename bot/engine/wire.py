"""The model's side of the engine without the SDK: the request type, the one-method ChatModel Protocol,
and the OpenAI chat wire format (what is sent, and what the audit records as sent)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

from bot.engine.messages import Message, ModelResponse


@dataclass(frozen=True)
class ModelRequest:
    model: str
    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...] = ()
    temperature: float | None = None

    @cached_property
    def payload(self) -> dict[str, Any]:
        """The request body, built once: the client sends it and the recorder stores it (read-only)."""
        return request_payload(self)


class ChatModel(Protocol):
    """Sends one request; returns the response or raises ModelError carrying retry advice. No retries."""

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


OnDelta = Callable[[str], Awaitable[None]]


@runtime_checkable
class StreamingChatModel(Protocol):
    """Optional for a ChatModel: `complete`, telling each fragment of the reply's text to `on_delta` as it
    arrives (a model that is not set to stream answers whole and tells nothing)."""

    async def complete_streaming(self, request: ModelRequest, on_delta: OnDelta) -> ModelResponse: ...


def to_wire(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        # "" rather than null: some local servers (llama.cpp) reject a null content next to tool_calls.
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    return out


def request_payload(request: ModelRequest) -> dict[str, Any]:
    payload: dict[str, Any] = {"model": request.model, "messages": [to_wire(m) for m in request.messages]}
    if request.tools:
        payload["tools"] = list(request.tools)
    if request.temperature is not None:
        payload["temperature"] = request.temperature
    return payload


def response_dict(response: ModelResponse) -> dict[str, Any]:
    return {"message": to_wire(response.message), "finish_reason": response.finish_reason, "model": response.model}
