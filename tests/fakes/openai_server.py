"""A scripted OpenAI-compatible server: `POST /v1/chat/completions`, spoken to by the real openai SDK.

Script replies in order (`reply`, `call`, `fail`, `hang`), or set `handler` to answer from the request
(for concurrent sessions). Every request body is recorded in `requests` (its headers in `headers`).
`raw` answers with a body exactly as given (a dict, or for a stream a list of SSE events): the shapes of
vLLM, llama.cpp, Ollama and LiteLLM, which differ from OpenAI's.

`enforce_window(n, flavour)` makes it count every prompt with its own tokenizer (not yokebot's: about
one token per 4 characters plus 4 per message and 8 per tool call, as chat templates add) and refuse one
over the window the way that server does: HTTP 400 with the body OpenAI, vLLM, llama.cpp, Ollama or
LiteLLM sends. Usage then reports the real count, as those servers do.

`POST /v1/embeddings` answers deterministic vectors (`embedding`: a hashed bag of the words' letter
trigrams, so texts sharing words or word parts are near, `postgres` and `postgresql` too); its requests go to
`embedding_requests`; `embeddings_status` set to an HTTP status makes it fail that way (404: a server
without embeddings)."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import json
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from aiohttp import web

from tests.fakes.loopback import LoopbackServer

_ids = itertools.count(1)


def server_tokens(body: dict[str, Any]) -> int:
    """The fake server's own count of a request's prompt (deliberately unlike yokebot's estimate)."""
    n = 3
    for m in body["messages"]:
        n += 4 + len(m.get("content") or "") // 4
        for c in m.get("tool_calls") or []:
            n += 8 + (len(c["function"]["name"]) + len(c["function"]["arguments"])) // 4
    if body.get("tools"):
        n += len(json.dumps(body["tools"])) // 4
    return n


def overflow_body(flavour: str, window: int, prompt: int) -> dict[str, Any]:
    """What each server sends (HTTP 400) for a prompt over its window."""
    if flavour == "openai":
        return {"error": {"message": f"This model's maximum context length is {window} tokens. However, your "
                                     f"messages resulted in {prompt} tokens. Please reduce the length of the "
                                     "messages.", "type": "invalid_request_error", "param": "messages",
                          "code": "context_length_exceeded"}}
    if flavour == "vllm":
        return {"object": "error", "message": f"This model's maximum context length is {window} tokens. "
                f"However, you requested {prompt + 256} tokens ({prompt} in the messages, 256 in the "
                "completion). Please reduce the length of the messages or completion.",
                "type": "BadRequestError", "param": None, "code": 400}
    if flavour == "llamacpp":
        return {"error": {"code": 400, "message": f"request ({prompt} tokens) exceeds the available context size "
                                                  f"({window} tokens)", "type": "exceed_context_size_error",
                          "n_prompt_tokens": prompt, "n_ctx": window}}
    if flavour == "ollama":
        return {"error": {"message": "input length exceeds the context length", "type": "api_error",
                          "param": None, "code": None}}
    if flavour == "litellm":
        return {"error": {"message": "litellm.ContextWindowExceededError: litellm.BadRequestError: "
                                     "ContextWindowExceededError: OpenAIException - This model's maximum context "
                                     f"length is {window} tokens. However, your messages resulted in {prompt} "
                                     "tokens.", "type": None, "param": None, "code": "400"}}
    raise ValueError(flavour)


@dataclass
class Step:
    kind: str  # reply | calls | fail | hang | raw
    content: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    usage: tuple[int, int] = (10, 5)
    body: Any = None  # raw: the JSON body, or the list of SSE `data:` events of a stream
    chunk_delay: float = 0.0  # streaming: seconds between content chunks (a model that writes slowly)
    cut_after: int | None = None  # streaming: drop the connection after this many content chunks
    release: threading.Event | None = None  # answer only once the test sets it (a model as slow as the test needs)


EMBEDDING_DIMS = 256


def embedding(text: str) -> list[float]:
    """A hashed bag of the letter trigrams of the text's words (with their edges), counted, not normalised."""
    vector = [0.0] * EMBEDDING_DIMS
    for word in re.findall(r"[^\W_]+", text.lower()):
        padded = f"<{word}>"
        for i in range(len(padded) - 2):
            digest = hashlib.blake2b(padded[i:i + 3].encode(), digest_size=4).digest()
            vector[int.from_bytes(digest, "little") % EMBEDDING_DIMS] += 1.0
    return vector


def call(name: str, arguments: dict[str, Any] | str, call_id: str | None = None) -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id or f"call_{next(_ids)}", "type": "function", "function": {"name": name, "arguments": args}}


class FakeOpenAI:
    def __init__(self) -> None:
        self.script: deque[Step] = deque()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.handler: Callable[[dict[str, Any]], Step] | None = None
        self.latency = 0.0
        self.window: int | None = None
        self.flavour = "openai"
        self.prompt_tokens: list[int] = []  # the server's count of every prompt it was sent
        self.refused = 0  # prompts refused as over the window
        self.models: list[str] | None = None  # GET /v1/models lists these; None: the route answers 404
        self.embedding_requests: list[dict[str, Any]] = []
        self.embeddings_status: int | None = None  # an HTTP status: /v1/embeddings fails with it
        self._lock = threading.Lock()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/embeddings", self._embeddings)
        self.server = LoopbackServer(app)

    # --- scripting ------------------------------------------------------------------------------------
    def reply(self, content: str, **kw: Any) -> FakeOpenAI:
        self.script.append(Step("reply", content=content, **kw))
        return self

    def calls(self, *calls: dict[str, Any], content: str = "", **kw: Any) -> FakeOpenAI:
        self.script.append(Step("calls", content=content, calls=list(calls), **kw))
        return self

    def fail(self, status: int, code: str | None = None, headers: dict[str, str] | None = None,
             message: str = "scripted failure") -> FakeOpenAI:
        self.script.append(Step("fail", status=status, code=code, headers=headers or {}, content=message))
        return self

    def enforce_window(self, window: int, flavour: str = "openai") -> FakeOpenAI:
        overflow_body(flavour, 1, 2)  # an unknown flavour fails here, not mid-test
        self.window, self.flavour = window, flavour
        return self

    def raw(self, body: Any, status: int = 200, headers: dict[str, str] | None = None) -> FakeOpenAI:
        """Answer with `body` as it is (a list: stream these events, then `[DONE]`; bytes: an HTML page)."""
        self.script.append(Step("raw", status=status, headers=headers or {}, body=body))
        return self

    def hang(self, seconds: float) -> FakeOpenAI:
        self.script.append(Step("hang", delay=seconds))
        return self

    # --- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> FakeOpenAI:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()

    @property
    def base_url(self) -> str:
        return f"{self.server.url}/v1"

    # --- serving ----------------------------------------------------------------------------------------
    def _next(self, body: dict[str, Any]) -> Step:
        with self._lock:
            self.requests.append(body)
            if self.script:
                return self.script.popleft()
        if self.handler is not None:
            return self.handler(body)
        return Step("fail", status=500, content="fake OpenAI: the script is exhausted")

    async def _models(self, request: web.Request) -> web.Response:
        if self.models is None:
            return web.json_response({"error": {"message": "not found", "type": "error"}}, status=404)
        if request.headers.get("Authorization") == "Bearer sk-rejected":
            return web.json_response({"error": {"message": "bad key", "type": "error", "code": "invalid_api_key"}},
                                     status=401)
        return web.json_response({"object": "list", "data": [self._model_entry(m) for m in self.models]})

    def _model_entry(self, model: str) -> dict[str, Any]:
        """As each server lists a model: vLLM and llama.cpp say the window they serve (with `enforce_window`)."""
        entry: dict[str, Any] = {"id": model, "object": "model", "created": 0, "owned_by": "fake"}
        if self.window is not None and self.flavour == "vllm":
            entry["max_model_len"] = self.window
        elif self.window is not None and self.flavour == "llamacpp":
            entry["meta"] = {"vocab_type": 2, "n_vocab": 128256, "n_ctx_train": self.window, "n_embd": 4096}
        return entry

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self._lock:
            self.embedding_requests.append(body)
        if self.embeddings_status is not None:
            error = {"message": "embeddings are not served here", "type": "error", "code": None, "param": None}
            return web.json_response({"error": error}, status=self.embeddings_status)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return web.json_response({
            "object": "list", "model": body["model"],
            "data": [{"object": "embedding", "index": i, "embedding": embedding(t)} for i, t in enumerate(texts)],
            "usage": {"prompt_tokens": sum(len(t) // 4 for t in texts), "total_tokens": sum(len(t) // 4 for t in texts)},
        })

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.headers.append(dict(request.headers))
        counted = server_tokens(body)
        with self._lock:
            self.prompt_tokens.append(counted)
        if self.window is not None and counted > self.window:
            with self._lock:
                self.requests.append(body)
                self.refused += 1
            return web.json_response(overflow_body(self.flavour, self.window, counted), status=400)
        step = self._next(body)
        if self.window is not None:
            step = dataclasses.replace(step, usage=(counted, step.usage[1]))
        if self.latency:
            await asyncio.sleep(self.latency)
        if step.kind == "hang":
            await asyncio.sleep(step.delay)
            step = Step("reply", content="(too late)")
        if step.delay:
            await asyncio.sleep(step.delay)
        if step.release is not None:
            await asyncio.get_running_loop().run_in_executor(None, step.release.wait, 120)
        if step.kind == "raw":
            return await self._raw(request, step)
        if step.kind == "fail":
            error = {"message": step.content, "type": "error", "code": step.code, "param": None}
            return web.json_response({"error": error}, status=step.status, headers=step.headers)
        if body.get("stream"):
            return await self._stream(request, body, step)
        message: dict[str, Any] = {"role": "assistant", "content": step.content or None}
        if step.calls:
            message["tool_calls"] = step.calls
        return web.json_response({
            "id": f"chatcmpl-{next(_ids)}", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if step.calls else "stop"}],
            "usage": {"prompt_tokens": step.usage[0], "completion_tokens": step.usage[1],
                      "total_tokens": sum(step.usage)},
        })

    async def _stream(self, request: web.Request, body: dict[str, Any], step: Step) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        base = {"id": f"chatcmpl-{next(_ids)}", "object": "chat.completion.chunk", "created": 0,
                "model": body["model"]}

        async def send(choices: list[dict[str, Any]], **extra: Any) -> None:
            await resp.write(f"data: {json.dumps({**base, 'choices': choices, **extra})}\n\n".encode())

        for n, i in enumerate(range(0, len(step.content), 8)):
            if step.cut_after is not None and n >= step.cut_after:
                if request.transport is not None:
                    request.transport.close()  # the model's connection breaks mid-answer
                return resp
            await send([{"index": 0, "delta": {"content": step.content[i:i + 8]}, "finish_reason": None}])
            if step.chunk_delay:
                await asyncio.sleep(step.chunk_delay)
        for n, c in enumerate(step.calls):
            head = {"index": n, "id": c["id"], "type": "function", "function": {"name": c["function"]["name"],
                                                                                "arguments": ""}}
            await send([{"index": 0, "delta": {"tool_calls": [head]}, "finish_reason": None}])
            args = c["function"]["arguments"]
            for i in range(0, len(args), 5):
                frag = {"index": n, "function": {"arguments": args[i:i + 5]}}
                await send([{"index": 0, "delta": {"tool_calls": [frag]}, "finish_reason": None}])
        await send([{"index": 0, "delta": {}, "finish_reason": "tool_calls" if step.calls else "stop"}])
        if (body.get("stream_options") or {}).get("include_usage"):
            await send([], usage={"prompt_tokens": step.usage[0], "completion_tokens": step.usage[1],
                                  "total_tokens": sum(step.usage)})
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def _raw(self, request: web.Request, step: Step) -> web.StreamResponse:
        if isinstance(step.body, bytes):  # not JSON at all (a proxy's or a portal's HTML page)
            return web.Response(body=step.body, status=step.status, content_type="text/html", headers=step.headers)
        if not isinstance(step.body, list):
            return web.json_response(step.body, status=step.status, headers=step.headers)
        resp = web.StreamResponse(status=step.status, headers={"Content-Type": "text/event-stream", **step.headers})
        await resp.prepare(request)
        for event in cast(list[Any], step.body):
            await resp.write(f"data: {json.dumps(event)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp
