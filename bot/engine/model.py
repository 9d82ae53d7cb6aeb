"""The OpenAI-compatible wire client, the only module that imports `openai`. It sends one request and
returns the response, or raises ModelError with retry advice (retryable, HTTP status, Retry-After). It
neither retries (the SDK's retries are off; `retrying.py` retries) nor records anything (hooks do)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import openai

from bot.engine.errors import ModelError
from bot.engine.messages import Message, ModelResponse, ToolCall, Usage
from bot.engine.wire import ModelRequest, OnDelta


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue
    return None


def _endpoint(exc: BaseException) -> str:
    request = getattr(exc, "request", None)
    url = str(getattr(request, "url", "") or "")
    return url.split("/chat/completions", 1)[0] or "OPENAI_BASE_URL"


def classify(exc: BaseException, model: str | None = None) -> ModelError:
    """Map an SDK exception to one sentence a user understands, with the advice a retrying caller needs."""
    if isinstance(exc, ModelError):
        return exc
    message, retryable, code = _judge(exc, model)
    status = getattr(exc, "status_code", None)
    return ModelError(message, retryable=retryable, code=code, status=status if isinstance(status, int) else None,
                      retry_after=_retry_after(exc), detail=f"{type(exc).__name__}: {exc}"[:4000])


def _judge(exc: BaseException, model: str | None) -> tuple[str, bool, str]:
    """(sentence, retryable, code): 429/5xx/timeouts/connection errors are worth retrying; a 400 and
    `insufficient_quota` never are."""
    code = cast(str | None, getattr(exc, "code", None))
    if isinstance(exc, openai.APITimeoutError):
        return "the model did not answer in time", True, "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "the model endpoint could not be reached", True, "connection"
    if isinstance(exc, openai.BadRequestError):
        if code == "context_length_exceeded":
            return ("the conversation is too long for the model's context window; start a new thread or lower "
                    "max_history_turns", False, code)
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
    return f"the model call failed unexpectedly ({type(exc).__name__})", False, "unexpected"


def _parse(resp: Any, fallback_model: str) -> ModelResponse:
    if not resp.choices:
        raise ModelError("the model returned no choices", code="empty")
    choice = resp.choices[0]
    msg = choice.message
    raw_calls: list[Any] = list(msg.tool_calls or [])
    calls = tuple(
        ToolCall(id=str(tc.id), name=str(tc.function.name), arguments=str(tc.function.arguments or ""))
        for tc in raw_calls
        if getattr(tc, "function", None) is not None
    )
    usage = Usage(resp.usage.prompt_tokens or 0, resp.usage.completion_tokens or 0) if resp.usage else Usage()
    return ModelResponse(
        message=Message.assistant(msg.content or "", calls),
        usage=usage,
        finish_reason=choice.finish_reason,
        model=resp.model or fallback_model,
    )


@dataclass
class _Partial:
    id: str = ""
    name: str = ""
    arguments: str = ""


async def _collect(stream: Any, fallback_model: str, on_delta: OnDelta | None = None) -> ModelResponse:
    """Assemble a streamed reply: content fragments (each told to `on_delta`), tool-call deltas by index, and
    the usage chunk."""
    content: list[str] = []
    calls: dict[int, _Partial] = {}
    usage, finish, model = Usage(), None, fallback_model
    async for chunk in stream:
        model = chunk.model or model
        if chunk.usage:
            usage = Usage(chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
        for choice in chunk.choices:
            delta = choice.delta
            finish = choice.finish_reason or finish
            if delta.content:
                content.append(delta.content)
                if on_delta is not None:
                    await on_delta(delta.content)
            deltas: list[Any] = list(delta.tool_calls or [])
            for tc in deltas:
                part = calls.setdefault(int(tc.index), _Partial())
                part.id = tc.id or part.id
                if tc.function is not None:
                    part.name = tc.function.name or part.name
                    part.arguments += tc.function.arguments or ""
    tool_calls = tuple(ToolCall(p.id, p.name, p.arguments) for _, p in sorted(calls.items()))
    return ModelResponse(Message.assistant("".join(content), tool_calls), usage, finish, model)


class OpenAIChatModel:
    """ChatModel over the openai SDK (`stream`: assemble the reply from a stream, usage included)."""

    def __init__(self, *, api_key: str | None, base_url: str | None, timeout: float = 60.0,
                 stream: bool = False) -> None:
        self.stream = stream
        self.client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self._complete(request, None)

    async def complete_streaming(self, request: ModelRequest, on_delta: OnDelta) -> ModelResponse:
        return await self._complete(request, on_delta)

    async def _complete(self, request: ModelRequest, on_delta: OnDelta | None) -> ModelResponse:
        payload = request.payload
        try:
            if self.stream:
                return await self._streamed(payload, request.model, on_delta)
            return _parse(await self.client.chat.completions.create(**payload), request.model)
        except ModelError:
            raise
        except Exception as exc:
            raise classify(exc, request.model) from exc

    async def close(self) -> None:
        await self.client.close()

    async def _streamed(self, payload: dict[str, Any], model: str, on_delta: OnDelta | None) -> ModelResponse:
        stream = await self.client.chat.completions.create(
            **payload, stream=True, stream_options={"include_usage": True}
        )
        return await _collect(stream, model, on_delta)
