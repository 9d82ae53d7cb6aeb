"""RetryingModel: retries a ChatModel in exactly one layer and reports every attempt.

It waits with exponential backoff and full jitter (uniform in [0, min(max, base * 2^(n-1))], tenacity's
`wait_random_exponential`), or as long as the server's Retry-After says (capped); it retries what the model
advises is retryable (429, 5xx, timeouts, connection errors) and never a 400 or `insufficient_quota`. Each
attempt, failed or not, goes to `on_attempt` (the turn's hooks). A plain loop rather than tenacity: this
runs on every model call, and building tenacity's retry state cost more than the rest of this module."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.engine.errors import ModelError
from bot.engine.messages import ModelResponse
from bot.engine.model.wire import ChatModel, ModelAttempt, ModelRequest, OnDelta, StreamingChatModel

OnAttempt = Callable[[ModelAttempt], Awaitable[None]]
CUT_OFF = "the model call was cut off: the turn was stopped while the model was answering"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 3
    base_seconds: float = 0.5
    max_wait_seconds: float = 20.0


async def _ignore(_: ModelAttempt) -> None:
    return None


class RetryingModel:
    def __init__(self, inner: ChatModel, policy: RetryPolicy | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.inner = inner
        self.policy = policy or RetryPolicy()
        self.sleep = sleep  # tests own the clock

    def _wait(self, number: int, err: ModelError) -> float:
        """Before attempt `number + 1`: the server's hint if it gave one, else a jittered exponential wait."""
        cap = self.policy.max_wait_seconds
        if err.retry_after is not None:
            return min(err.retry_after, cap)
        return random.uniform(0, min(cap, self.policy.base_seconds * 2 ** (number - 1)))

    async def complete(self, request: ModelRequest, on_attempt: OnAttempt = _ignore,
                       on_delta: OnDelta | None = None) -> ModelResponse:
        """`on_delta` hears the reply's text as it streams, when the inner model can (a retried attempt
        streams again from the start: `on_attempt` tells of the failed one first)."""
        number = 0
        while True:
            number += 1
            try:
                return await self._attempt(request, number, on_attempt, on_delta)
            except ModelError as err:
                if not err.retryable:
                    raise
                if number >= self.policy.max_attempts:
                    raise ModelError(f"{err} (gave up after {number} attempts)", code=err.code,
                                     status=err.status) from err
                await self.sleep(self._wait(number, err))

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
        except asyncio.CancelledError:  # Ctrl-C or SIGTERM mid-call: the provider may bill it, so llm_calls has it
            cut = ModelError(CUT_OFF, code="cancelled", detail=CUT_OFF)  # the audit row: these words, no class
            await on_attempt(ModelAttempt(request, number, (time.perf_counter() - started) * 1000, error=cut))
            raise
        except Exception as exc:  # a model that does not classify its errors: not worth retrying
            err = ModelError(f"the model call failed unexpectedly ({type(exc).__name__})", code="unexpected",
                             detail=f"{type(exc).__name__}: {exc}"[:4000])
            await on_attempt(ModelAttempt(request, number, (time.perf_counter() - started) * 1000, error=err))
            raise err from exc
        await on_attempt(ModelAttempt(request, number, (time.perf_counter() - started) * 1000, response))
        return response

    async def close(self) -> None:
        await self.inner.close()
