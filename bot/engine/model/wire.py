"""The model's side of the engine without the SDK: the request type, the one-method ChatModel Protocol,
and the OpenAI chat wire format (what is sent, and what the audit records as sent)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from bot.engine.errors import ModelError
from bot.engine.messages import Message, ModelResponse, Usage

K = TypeVar("K")
# what a call is for (not sent; `llm_calls.purpose`): the turn's own, the last call without tools, a summary of
# older turns, an incident's conclusion in a few sentences (bot/alerts/incidents.py)
CallPurpose = Literal["turn", "final", "compaction", "incident"]


@dataclass(frozen=True)
class ModelRequest:
    model: str
    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...] = ()
    temperature: float | None = None
    purpose: CallPurpose = "turn"

    @cached_property
    def payload(self) -> dict[str, Any]:
        """The request body, built once: the client sends it and the recorder stores it (read-only)."""
        return request_payload(self)

    def body(self, **extra: Any) -> bytes:
        """`payload` (plus `extra` keys) as the JSON bytes sent. Each message is encoded once per process
        (it does not change), so a call costs what is new in it, not the length of the history."""
        parts = [b'{"model":', dumps(self.model), b',"messages":[', b",".join(map(encoded, self.messages)), b"]"]
        if self.tools:
            parts += [b',"tools":[', b",".join(map(encoded_schema, self.tools)), b"]"]
        if self.temperature is not None:
            parts += [b',"temperature":', dumps(self.temperature)]
        for key, value in extra.items():
            parts += [b",", dumps(key), b":", dumps(value)]
        parts.append(b"}")
        return b"".join(parts)


class ChatModel(Protocol):
    """Sends one request; returns the response or raises ModelError carrying retry advice. No retries."""

    async def complete(self, request: ModelRequest) -> ModelResponse: ...

    async def close(self) -> None:
        """Release what the model holds (an HTTP client); by default nothing (as openai-agents' `Model.close`).
        A model that holds nothing inherits this by naming `ChatModel` as its base."""
        return None

    async def embed(self, model: str, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text from the endpoint's embeddings model `model`; by default the model has none
        (ModelError: the memories fall back to keywords, bot/engine/model/embeddings.py)."""
        raise ModelError("this model client has no embeddings endpoint")


OnDelta = Callable[[str], Awaitable[None]]


@runtime_checkable
class StreamingChatModel(Protocol):
    """Optional for a ChatModel: `complete`, telling each fragment of the reply's text to `on_delta` as it
    arrives (a model that is not set to stream answers whole and tells nothing)."""

    async def complete_streaming(self, request: ModelRequest, on_delta: OnDelta) -> ModelResponse: ...


def to_wire(message: Message, elide_images: bool = False) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.images:  # the audit keeps each image's hash, not its bytes (the `attachments` row has the rest)
        out["content"] = [{"type": "text", "text": message.content}, *(
            {"type": "image_url", "image_url": {"url": f"data:{i.mimetype};sha256,{i.sha256}" if elide_images
                                                else f"data:{i.mimetype};base64,{i.data}"}}
            for i in message.images)]
    if message.tool_calls:
        # "" rather than null: some local servers (llama.cpp) reject a null content next to tool_calls.
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    return out


def dumps(value: Any) -> bytes:
    """JSON as the SDK writes it (UTF-8, no spaces, no NaN)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class _ByIdentity(Generic[K]):
    """JSON bytes kept per object identity, for objects that never change once built. An entry holds the
    object itself, so its id is not reused while the entry lives; full at `size`, it starts over."""

    def __init__(self, size: int, encode: Callable[[K], bytes]) -> None:
        self.size, self.encode = size, encode
        self._items: dict[int, tuple[K, bytes]] = {}

    def __call__(self, obj: K) -> bytes:
        hit = self._items.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        if len(self._items) >= self.size:
            self._items.clear()
        data = self.encode(obj)
        self._items[id(obj)] = (obj, data)
        return data


@lru_cache(maxsize=1024)
def _encoded(message: Message) -> bytes:
    return dumps(to_wire(message))


# One message's wire JSON. By identity first (a turn's calls send the same Message objects again: a dict
# lookup, where hashing a frozen dataclass builds and hashes a tuple of its fields), then by equality
# (messages are frozen: a thread's history read again for the next turn is equal, not identical).
_cached = _ByIdentity[Message](1024, _encoded)


def encoded(message: Message) -> bytes:
    return dumps(to_wire(message)) if message.images else _cached(message)  # images: megabytes, not cached

# A tool schema's JSON: schemas are built once per tool and never changed.
encoded_schema = _ByIdentity[dict[str, Any]](512, dumps)


def request_payload(request: ModelRequest) -> dict[str, Any]:
    payload: dict[str, Any] = {"model": request.model, "messages": [to_wire(m, True) for m in request.messages]}
    if request.tools:
        payload["tools"] = list(request.tools)
    if request.temperature is not None:
        payload["temperature"] = request.temperature
    return payload


def response_dict(response: ModelResponse) -> dict[str, Any]:
    return {"message": to_wire(response.message), "finish_reason": response.finish_reason, "model": response.model}


@dataclass(frozen=True, slots=True)
class ModelAttempt:
    """One model call attempt (each retry is one): what was sent, and the response or the error."""

    request: ModelRequest
    attempt: int
    latency_ms: float
    response: ModelResponse | None = None
    error: ModelError | None = None

    @property
    def usage(self) -> Usage:
        return self.response.usage if self.response is not None else Usage()

    @property
    def model(self) -> str:
        return self.response.model if self.response is not None else self.request.model
