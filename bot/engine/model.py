"""The model behind one small Protocol. This is the only module that imports `openai`.

tenacity owns retries (the SDK's own are off, or they would multiply): exponential backoff with jitter,
`Retry-After` honoured, 429/5xx/timeouts/connection errors retried, 400s and `insufficient_quota` never.
Every attempt writes an `llm_calls` row through the AuditLog port."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol, cast

import openai
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_random_exponential

from bot.engine.errors import ContextOverflow, ModelError
from bot.engine.messages import Message, ModelResponse, ToolCall, Usage
from bot.engine.overflow import detect
from bot.engine.ports import AuditLog, LLMCallRecord


@dataclass(frozen=True, slots=True)
class ModelRequest:
    model: str
    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...] = ()
    temperature: float | None = None
    purpose: str = "turn"  # not sent: turn | final (the last call without tools) | compaction (a summary)


@dataclass(frozen=True, slots=True)
class CallMeta:
    session_id: str
    turn_id: str
    agent: str


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 3
    base_seconds: float = 0.5
    max_wait_seconds: float = 20.0


class ChatModel(Protocol):
    async def complete(self, request: ModelRequest, meta: CallMeta) -> ModelResponse: ...


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
    """Map an SDK exception to one sentence a user understands, and whether it is worth retrying."""
    if isinstance(exc, ModelError):
        return exc
    code = cast(str | None, getattr(exc, "code", None))
    if isinstance(exc, openai.APITimeoutError):
        return ModelError("the model did not answer in time", retryable=True, code="timeout")
    if isinstance(exc, openai.APIConnectionError):
        return ModelError("the model endpoint could not be reached", retryable=True, code="connection")
    if isinstance(exc, openai.APIStatusError):
        overflow = detect(exc.status_code, exc.message, exc.body)
        if overflow is not None:
            return ContextOverflow("the conversation is too long for the model's context window",
                                   window=overflow.window, prompt_tokens=overflow.prompt_tokens)
    if isinstance(exc, openai.BadRequestError):
        return ModelError(f"the model rejected the request ({exc.message})", code=code or "bad_request")
    if isinstance(exc, openai.RateLimitError):
        if code == "insufficient_quota":
            return ModelError("the model provider says the account is out of quota", code=code)
        return ModelError("the model provider is rate limiting us", retryable=True, code="rate_limited")
    if isinstance(exc, openai.AuthenticationError):
        return ModelError("the model endpoint refused the API key; check OPENAI_API_KEY", code="auth")
    if isinstance(exc, openai.NotFoundError):
        return ModelError(  # a configuration error, not a passing failure: say which setting to change
            f"the model {model or '(unnamed)'!r} is not known at {_endpoint(exc)} (HTTP 404); set YOKEBOT_MODEL (or "
            "the profile's model:) to a model that endpoint serves, and check OPENAI_BASE_URL",
            code="not_found",
        )
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retryable = status in (408, 409) or status >= 500
        return ModelError(f"the model endpoint answered HTTP {status}", retryable=retryable, code=f"http_{status}")
    return ModelError(f"the model call failed unexpectedly ({type(exc).__name__})", code="unexpected")


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


async def _collect(stream: Any, fallback_model: str) -> ModelResponse:
    """Assemble a streamed reply: content fragments, tool-call deltas by index, and the usage chunk."""
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
            deltas: list[Any] = list(delta.tool_calls or [])
            for tc in deltas:
                part = calls.setdefault(int(tc.index), _Partial())
                part.id = tc.id or part.id
                if tc.function is not None:
                    part.name = tc.function.name or part.name
                    part.arguments += tc.function.arguments or ""
    tool_calls = tuple(ToolCall(p.id, p.name, p.arguments) for _, p in sorted(calls.items()))
    return ModelResponse(Message.assistant("".join(content), tool_calls), usage, finish, model)


def response_dict(response: ModelResponse) -> dict[str, Any]:
    return {"message": to_wire(response.message), "finish_reason": response.finish_reason, "model": response.model}


class OpenAIChatModel:
    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None,
        audit: AuditLog,
        retry: RetryPolicy | None = None,
        timeout: float = 60.0,
        stream: bool = False,
    ) -> None:
        self.stream = stream
        self.client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout)
        self.audit = audit
        self.retry = retry or RetryPolicy()
        self._backoff = wait_random_exponential(multiplier=self.retry.base_seconds, max=self.retry.max_wait_seconds)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        hinted = _retry_after(exc) if exc else None
        if hinted is not None:
            return min(hinted, self.retry.max_wait_seconds)
        return self._backoff(state)

    async def complete(self, request: ModelRequest, meta: CallMeta) -> ModelResponse:
        payload = request_payload(request)
        attempt = 0
        try:
            async for attempt_ctx in AsyncRetrying(
                stop=stop_after_attempt(self.retry.max_attempts),
                wait=self._wait,
                retry=retry_if_exception(lambda e: isinstance(e, ModelError) and e.retryable),
                reraise=True,
            ):
                with attempt_ctx:
                    attempt += 1
                    return await self._attempt(payload, request, meta, attempt)
        except ModelError as err:
            if err.retryable:
                raise ModelError(f"{err} (gave up after {attempt} attempts)", code=err.code) from err
            raise
        raise ModelError("the model call was not attempted", code="unexpected")  # pragma: no cover

    async def close(self) -> None:
        await self.client.close()

    async def _streamed(self, payload: dict[str, Any], model: str) -> ModelResponse:
        stream = await self.client.chat.completions.create(
            **payload, stream=True, stream_options={"include_usage": True}
        )
        return await _collect(stream, model)

    async def _attempt(self, payload: dict[str, Any], request: ModelRequest, meta: CallMeta,
                       attempt: int) -> ModelResponse:
        model, purpose = request.model, request.purpose
        started = time.perf_counter()
        try:
            if self.stream:
                response = await self._streamed(payload, model)
            else:
                response = _parse(await self.client.chat.completions.create(**payload), model)
        except Exception as exc:
            err = classify(exc, model)
            detail = f"{type(exc).__name__}: {exc}"
            await self.audit.record_llm_call(
                LLMCallRecord(
                    meta.session_id, meta.turn_id, meta.agent, model, attempt, payload, None, Usage(),
                    (time.perf_counter() - started) * 1000, None, detail[:4000], purpose,
                )
            )
            raise err from exc
        await self.audit.record_llm_call(
            LLMCallRecord(
                meta.session_id, meta.turn_id, meta.agent, response.model, attempt, payload,
                response_dict(response), response.usage, (time.perf_counter() - started) * 1000,
                response.finish_reason, purpose=purpose,
            )
        )
        return response
