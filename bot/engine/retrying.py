"""RetryingModel: retries a ChatModel in exactly one layer and reports every attempt.

tenacity waits with exponential backoff and jitter, or as long as the server's Retry-After says (capped);
it retries what the model advises is retryable (429, 5xx, timeouts, connection errors) and never a 400 or
`insufficient_quota`. Each attempt, failed or not, goes to `on_attempt` (the turn's hooks)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_random_exponential

from bot.engine.errors import ModelError
from bot.engine.hooks import ModelAttempt
from bot.engine.messages import ModelResponse
from bot.engine.wire import ChatModel, ModelRequest, OnDelta, StreamingChatModel

OnAttempt = Callable[[ModelAttempt], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 3
    base_seconds: float = 0.5
    max_wait_seconds: float = 20.0


async def _ignore(_: ModelAttempt) -> None:
    return None


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, ModelError) and exc.retryable


class RetryingModel:
    def __init__(self, inner: ChatModel, policy: RetryPolicy | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.inner = inner
        self.policy = policy or RetryPolicy()
        self.sleep = sleep  # tests own the clock
        self._backoff = wait_random_exponential(multiplier=self.policy.base_seconds,
                                                max=self.policy.max_wait_seconds)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        hinted = exc.retry_after if isinstance(exc, ModelError) else None
        if hinted is not None:
            return min(hinted, self.policy.max_wait_seconds)
        return self._backoff(state)

    async def complete(self, request: ModelRequest, on_attempt: OnAttempt = _ignore,
                       on_delta: OnDelta | None = None) -> ModelResponse:
        """`on_delta` hears the reply's text as it streams, when the inner model can (a retried attempt
        streams again from the start: `on_attempt` tells of the failed one first)."""
        attempts = AsyncRetrying(stop=stop_after_attempt(self.policy.max_attempts), wait=self._wait,
                                 retry=retry_if_exception(_retryable), reraise=True, sleep=self.sleep)
        number = 0
        try:
            async for attempt in attempts:
                with attempt:
                    number += 1
                    return await self._attempt(request, number, on_attempt, on_delta)
        except ModelError as err:
            if err.retryable:
                raise ModelError(f"{err} (gave up after {number} attempts)", code=err.code,
                                 status=err.status) from err
            raise
        raise ModelError("the model call was not attempted", code="unexpected")  # pragma: no cover

    async def _attempt(self, request: ModelRequest, number: int, on_attempt: OnAttempt,
                       on_delta: OnDelta | None) -> ModelResponse:
        started = time.perf_counter()
        try:
            if on_delta is not None and isinstance(self.inner, StreamingChatModel):
                response = await self.inner.complete_streaming(request, on_delta)
            else:
                response = await self.inner.complete(request)
        except ModelError as err:
            await on_attempt(ModelAttempt(request, number, (time.perf_counter() - started) * 1000, error=err))
            raise
        except Exception as exc:  # a model that does not classify its errors: not worth retrying
            err = ModelError(f"the model call failed unexpectedly ({type(exc).__name__})", code="unexpected",
                             detail=f"{type(exc).__name__}: {exc}"[:4000])
            await on_attempt(ModelAttempt(request, number, (time.perf_counter() - started) * 1000, error=err))
            raise err from exc
        await on_attempt(ModelAttempt(request, number, (time.perf_counter() - started) * 1000, response))
        return response

    async def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            await close()
