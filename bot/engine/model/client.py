"""The OpenAI-compatible wire client, the only module that imports `openai`. It sends one request and
returns the response, or raises ModelError with retry advice (retryable, HTTP status, Retry-After). It
neither retries (the SDK's retries are off; `retrying.py` retries) nor records anything (hooks do).

The body is the wire-format payload the request already holds (`ModelRequest.payload`), sent through the
SDK's documented low-level call `client.post("/chat/completions", cast_to=object, content=...)`: the same
client, auth, base URL, error classes, headers and `AsyncStream` (its SSE parsing and in-stream errors) as
`chat.completions.create`, without `create`'s per-call TypedDict transform of every message and tool
schema (9 ms for 20 messages and 8 tools, growing with the history; `bench/model_overhead.py`). The
answer's JSON is read straight into our own frozen `ModelResponse` (`cast_to=object` hands over the
decoded JSON): building the SDK's `ChatCompletion` first (pydantic `construct` of every nested object,
default values deep-copied) cost more per call than everything else on our side of the request.

Servers differ (vLLM, llama.cpp, Ollama, LiteLLM and other proxies): `usage` may be missing, `content`
null next to tool calls, tool-call ids or `type` absent, arguments an object instead of a JSON string,
error codes given as HTTP status strings or numbers, retry hints under `retry-after-ms`, `retry-after`
(seconds or an HTTP date) or `x-ratelimit-reset-*` (`1s`, `6m0s`, `250ms`). All of these are read here.

The SDK itself (about a second of imports) loads off the event loop: in a background thread that
`preload()` starts (the `chat` command, as soon as its prompt shows) or, at the latest, that the first
call starts and awaits. `import bot.app` does not import it."""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, cast

from bot.engine.errors import ContextOverflow, ModelError
from bot.engine.messages import Message, ModelResponse, ToolCall, Usage
from bot.engine.model.overflow import detect
from bot.engine.model.pacing import pace_reply
from bot.engine.model.windows import reported_windows
from bot.engine.model.wire import ChatModel, ModelRequest, OnDelta

if TYPE_CHECKING:
    import openai
    from openai import AsyncStream

log = logging.getLogger(__name__)

_PATH = "/chat/completions"
_SECURITY: Any = {"security": {"bearer_auth": True}}  # the request options `create` sends: the API key only
_STREAM_OPTIONS: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}}
# Retry hints, most precise first: OpenAI/Azure `retry-after-ms`, the standard `Retry-After` (seconds or
# an HTTP date), then the rate-limit reset headers OpenAI, vLLM routers and LiteLLM send (`6m0s`, `20ms`).
_HINTS = ("retry-after-ms", "retry-after", "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens",
          "x-ratelimit-reset")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_CONTEXT_WORDS = ("context_length", "context length", "context window", "context size", "exceed_context",
                  "contextwindowexceeded", "too many tokens", "maximum context")


_sdk_lock = threading.Lock()
_sdk_loading: list[Future[None]] = []  # at most one: the background import of the SDK


def preload() -> Future[None]:
    """Start importing the openai SDK in a background thread (once per process); the future resolves when
    it is loaded."""
    with _sdk_lock:
        if not _sdk_loading:
            done: Future[None] = Future()

            def load() -> None:
                try:
                    for name in ("openai",):
                        importlib.import_module(name)
                    done.set_result(None)
                except BaseException as exc:  # surfaces at the first model call
                    done.set_exception(exc)

            threading.Thread(target=load, name="openai-import", daemon=True).start()
            _sdk_loading.append(done)
        return _sdk_loading[0]


def _seconds(name: str, value: str) -> float | None:
    """One header's retry hint in seconds, or None if it says nothing usable."""
    value = value.strip()
    if name == "retry-after-ms":
        return float(value) / 1000 if _is_number(value) else None
    if _is_number(value):
        return float(value)
    if name == "retry-after":
        try:
            return parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError):
            return None
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value.replace(" ", ""):
        return None
    return sum(float(n) * _UNIT[u] for n, u in parts)


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name in _HINTS:
        value = headers.get(name)
        seconds = _seconds(name, value) if isinstance(value, str) else None
        if seconds is not None:
            return max(0.0, seconds)
    return None


def _endpoint(exc: BaseException) -> str:
    request = getattr(exc, "request", None)
    url = str(getattr(request, "url", "") or "")
    return url.split(_PATH, 1)[0] or "OPENAI_BASE_URL"


def _code(exc: BaseException) -> str | None:
    """The error's own code, if it is a word: proxies (LiteLLM) and vLLM put the HTTP status there ("429", 400)."""
    code = getattr(exc, "code", None)
    if code is None or isinstance(code, int) or not str(code).strip() or str(code).strip().isdigit():
        return None
    return str(code)


def _context_overflow(exc: BaseException, code: str | None) -> bool:
    body: Any = getattr(exc, "body", None)
    kind: Any = cast(dict[str, Any], body).get("type") if isinstance(body, dict) else None
    text = f"{code} {kind} {getattr(exc, 'message', '')}".lower()
    return any(word in text for word in _CONTEXT_WORDS)


def classify(exc: BaseException, model: str | None = None) -> ModelError:
    """Map an SDK exception to one sentence a user understands, with the advice a retrying caller needs."""
    import openai

    if isinstance(exc, ModelError):
        return exc
    status = getattr(exc, "status_code", None)
    if isinstance(exc, openai.APIStatusError):
        overflow = detect(exc.status_code, exc.message, exc.body)
        if overflow is not None:  # every server's wording (bot/engine/model/overflow.py): the loop compacts and retries
            return ContextOverflow("the conversation is too long for the model's context window",
                                   window=overflow.window, prompt_tokens=overflow.prompt_tokens,
                                   status=exc.status_code, detail=f"{type(exc).__name__}: {exc}"[:4000])
    message, retryable, code = _judge(exc, model)
    return ModelError(message, retryable=retryable, code=code, status=status if isinstance(status, int) else None,
                      retry_after=_retry_after(exc), detail=_detail(exc))


def _refused(exc: BaseException) -> OSError | None:
    """A "timeout" that is really a refused connection or an unknown host: the aiohttp transport reports a
    failed connect as `ConnectTimeout`, with the `OSError` (ECONNREFUSED, a DNS error) underneath."""
    seen = exc.__cause__ or exc.__context__
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, OSError) and not isinstance(seen, TimeoutError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _why_refused(refused: OSError) -> str:
    """"127.0.0.1:9: connection refused", not aiohttp's "Cannot connect to host … [Connect call failed …]"."""
    host, port = getattr(refused, "host", None), getattr(refused, "port", None)
    inner = getattr(refused, "os_error", None)
    error = inner if isinstance(inner, OSError) else refused
    if error.strerror and not error.strerror.startswith("Connect call failed"):
        why = error.strerror  # "Name or service not known"
    elif error.errno and error.errno > 0:
        why = os.strerror(error.errno)  # "Connection refused"
    else:
        why = str(error) or type(error).__name__
    why = why[:1].lower() + why[1:]
    return f"{host}:{port}: {why}" if host else why


def _detail(exc: BaseException) -> str:
    """For the log line and the audit row: a refused connection by its own name, not the transport's timeout."""
    refused = _refused(exc)
    if refused is not None:  # one cause, once: the OS's words, not the transport's timeout wrapped around them
        return f"could not connect to the model endpoint: {_why_refused(refused)}"[:4000]
    return f"{type(exc).__name__}: {exc}"[:4000]


def _judge(exc: BaseException, model: str | None) -> tuple[str, bool, str]:
    """(sentence, retryable, code): 429/5xx/timeouts/connection errors are worth retrying; a 400 and
    `insufficient_quota` never are."""
    import openai

    code = _code(exc)
    if isinstance(exc, openai.APITimeoutError) and _refused(exc) is None:
        return "the model did not answer in time", True, "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "the model endpoint could not be reached", True, "connection"
    if isinstance(exc, openai.BadRequestError):
        if _context_overflow(exc, code):
            return ("the conversation is too long for the model's context window; start a new thread or lower "
                    "max_history_turns", False, "context_length_exceeded")
        return f"the model rejected the request ({exc.message})", False, code or "bad_request"
    if isinstance(exc, openai.RateLimitError):
        if code == "insufficient_quota":
            return "the model provider says the account is out of quota", False, code
        return "the model provider is rate limiting us", True, "rate_limited"
    if isinstance(exc, openai.AuthenticationError):
        return "the model endpoint refused the API key; check OPENAI_API_KEY", False, "auth"
    if isinstance(exc, openai.NotFoundError):
        return (  # a configuration error, not a passing failure: say which setting to change
            f"the model {model or '(unnamed)'!r} is not known at {_endpoint(exc)} (HTTP 404); set YOKEBOT_MODEL (or "
            "the profile's model:) to a model that endpoint serves, and check OPENAI_BASE_URL", False, "not_found")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        return f"the model endpoint answered HTTP {status}", status in (408, 409) or status >= 500, f"http_{status}"
    if isinstance(exc, openai.APIError):  # an error event inside a stream: the server gave up mid-answer
        return f"the model endpoint failed while answering ({exc.message})", True, code or "stream_error"
    return f"the model call failed unexpectedly ({type(exc).__name__})", False, "unexpected"


def _arguments(value: Any) -> str:
    """Arguments as the JSON text the executor parses: some servers (Ollama) send an object, not a string."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _dict(value: Any) -> dict[str, Any]:
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return cast(list[Any], value) if isinstance(value, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _tool_calls(raw_calls: list[Any]) -> tuple[ToolCall, ...]:
    calls: list[ToolCall] = []
    for n, tc in enumerate(raw_calls):
        function = _dict(_dict(tc).get("function"))
        name = _str(function.get("name"))
        if name is None:
            continue
        call_id = _str(_dict(tc).get("id")) or f"call_{n}"  # llama.cpp and Ollama may leave the id out
        calls.append(ToolCall(id=call_id, name=name, arguments=_arguments(function.get("arguments"))))
    return tuple(calls)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage(raw: Any) -> Usage:
    usage = _dict(raw)  # vLLM, llama.cpp and Ollama may leave `usage` out
    return Usage(_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")))


def _error_in_body(body: dict[str, Any]) -> ModelError:
    """HTTP 200 without choices: some proxies put the error in the body instead of the status."""
    error: Any = body.get("error")
    if isinstance(error, dict):
        error = cast(dict[str, Any], error)
        text = str(error.get("message") or error)[:300]
        return ModelError(f"the model endpoint answered with an error ({text})", code="body_error",
                          detail=json.dumps(error, default=str)[:4000])
    return ModelError("the model returned no choices", code="empty")


def _parse(body: Any, fallback_model: str) -> ModelResponse:
    """The JSON of a chat completion, read as OpenAI documents it and as other servers bend it."""
    if not isinstance(body, dict):
        raise ModelError("the model endpoint answered with something that is not a chat completion",
                         code="not_json", detail=str(body)[:4000])
    body = cast(dict[str, Any], body)
    choices = _list(body.get("choices"))
    if not choices:
        raise _error_in_body(body)
    choice = _dict(choices[0])
    msg = _dict(choice.get("message"))
    content = msg.get("content")
    calls = _tool_calls(_list(msg.get("tool_calls")))
    return ModelResponse(
        message=Message.assistant(content if isinstance(content, str) else "", calls),
        usage=_usage(body.get("usage")),
        finish_reason=_str(choice.get("finish_reason")),
        model=_str(body.get("model")) or fallback_model,
    )


@dataclass
class _Partial:
    id: str = ""
    name: str = ""
    arguments: str = ""


def _merge_call(calls: dict[int, _Partial], tc: dict[str, Any], position: int) -> None:
    index = tc.get("index")
    part = calls.setdefault(index if isinstance(index, int) else position, _Partial())
    part.id = _str(tc.get("id")) or part.id
    function = tc.get("function")
    if isinstance(function, dict):
        function = cast(dict[str, Any], function)
        part.name = _str(function.get("name")) or part.name
        part.arguments += _arguments(function.get("arguments"))


async def _collect(stream: AsyncStream[object], fallback_model: str,
                   on_delta: OnDelta | None = None) -> ModelResponse:
    """Assemble a streamed reply from its chunks (JSON objects): content fragments (each told to `on_delta`),
    tool-call deltas by index, and the usage chunk."""
    content: list[str] = []
    calls: dict[int, _Partial] = {}
    usage, finish, model = Usage(), None, fallback_model
    async for raw in stream:
        chunk = _dict(raw)
        model = _str(chunk.get("model")) or model
        if chunk.get("usage"):
            usage = _usage(chunk["usage"])
        for choice in _list(chunk.get("choices")):
            choice = _dict(choice)
            delta = _dict(choice.get("delta"))
            finish = _str(choice.get("finish_reason")) or finish
            text = delta.get("content")
            if isinstance(text, str) and text:
                content.append(text)
                if on_delta is not None:
                    await on_delta(text)
            for position, tc in enumerate(_list(delta.get("tool_calls"))):
                _merge_call(calls, _dict(tc), position)
    tool_calls = tuple(ToolCall(p.id or f"call_{i}", p.name, p.arguments)
                       for i, p in sorted(calls.items()) if p.name)
    return ModelResponse(Message.assistant("".join(content), tool_calls), usage, finish, model)


class OpenAIChatModel(ChatModel):
    """ChatModel over the openai SDK (`stream`: assemble the reply from a stream, usage included)."""

    def __init__(self, *, api_key: str | None, base_url: str | None, timeout: float = 60.0,
                 stream: bool = False, headers: Callable[[], Mapping[str, str]] | None = None) -> None:
        self.stream = stream
        self.headers = headers  # extra headers per attempt (tracing's `traceparent`), asked just before it is sent
        self._options: dict[str, Any] = {"api_key": api_key, "base_url": base_url, "max_retries": 0,
                                         "timeout": timeout}
        self._client: openai.AsyncOpenAI | None = None

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client (made on first use; this imports the SDK if `preload` has not)."""
        if self._client is None:
            import openai

            # the SDK's own aiohttp transport (`openai[aiohttp]`; aiohttp is ours anyway): a third less CPU per
            # call than its default httpx transport (bench/model_overhead.py), same errors, proxies and streams.
            # Each reply waits for its place in a burst once its headers are in (pacing.py: 200 at once, spread)
            http = openai.DefaultAioHttpClient(event_hooks={"response": [pace_reply]})
            self._client = openai.AsyncOpenAI(**self._options, http_client=http)
        return self._client

    async def reported_windows(self, seconds: float = 3.0) -> dict[str, int]:
        """{model: context window} as the endpoint's `GET /models` reports it (vLLM, llama.cpp...; OpenAI's
        says nothing). Best effort: an endpoint without the route, or slow, reports nothing."""
        client = self.client  # the SDK's import is not the endpoint's time
        try:
            async with asyncio.timeout(seconds):
                listed = [m.model_dump() async for m in client.models.list()]
        except Exception as exc:  # only a guess gets better here: never a reason to fail a start
            log.debug("the model endpoint did not list its models (%s)", type(exc).__name__)
            return {}
        return reported_windows(listed)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self._complete(request, None)

    async def complete_streaming(self, request: ModelRequest, on_delta: OnDelta) -> ModelResponse:
        return await self._complete(request, on_delta)

    async def _complete(self, request: ModelRequest, on_delta: OnDelta | None) -> ModelResponse:
        if self._client is None:
            await asyncio.wrap_future(preload())  # the import runs in a thread, not on the event loop
        try:
            if self.stream:
                return await self._streamed(request, on_delta)
            return await self._plain(request)
        except ModelError:
            raise
        except Exception as exc:
            raise classify(exc, request.model) from exc

    async def embed(self, model: str, texts: Sequence[str]) -> list[list[float]]:
        """`POST /embeddings` through the same client (auth, base URL, errors); one vector per text, in order."""
        if self._client is None:
            await asyncio.wrap_future(preload())
        try:
            body = await self.client.post("/embeddings", cast_to=object, body={"model": model, "input": list(texts)},
                                          options=self._request_options())
        except Exception as exc:
            raise classify(exc, model) from exc
        data = sorted(_list(_dict(body).get("data")), key=lambda d: _count(_dict(d).get("index")))
        vectors = [[float(x) for x in _list(_dict(d).get("embedding"))] for d in data]
        if len(vectors) != len(texts) or not all(vectors):
            raise ModelError(f"the embeddings endpoint answered {len(vectors)} vectors for {len(texts)} texts",
                             detail=json.dumps(body)[:500])
        return vectors

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()

    def _request_options(self) -> Any:
        extra = self.headers() if self.headers is not None else None
        return {**_SECURITY, "headers": dict(extra)} if extra else _SECURITY

    async def _plain(self, request: ModelRequest) -> ModelResponse:
        body = await self.client.post(_PATH, cast_to=object, content=request.body(), options=self._request_options())
        return _parse(body, request.model)

    async def _streamed(self, request: ModelRequest, on_delta: OnDelta | None = None) -> ModelResponse:
        from openai import AsyncStream

        stream = await self.client.post(_PATH, cast_to=object, content=request.body(**_STREAM_OPTIONS),
                                        options=self._request_options(), stream=True, stream_cls=AsyncStream[object])
        async with stream:
            return await _collect(stream, request.model, on_delta)
