"""The one path every model call of a turn takes, whoever asks (the ReAct loop, the planner, compaction):
the prompt is fitted to the model's window (`window.py`), sent through the retrying model with the turn's
hooks listening, a context-length error compacts the thread and sends again (twice at most, and only a
prompt strictly smaller than the one refused: the same prompt would be refused again), what the server
counted calibrates our token counter, and the call is charged to the turn that made it (its `TurnState`) and
to the spend caps it runs under (`spend.py`), which are checked before it is sent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bot.engine.context.compaction import Compactor
from bot.engine.context.window import FittedPrompt, ThreadWindow
from bot.engine.errors import ContextOverflow
from bot.engine.messages import Message, ModelResponse, Usage
from bot.engine.model.pacing import REPLIES
from bot.engine.model.retrying import OnAttempt, RetryingModel
from bot.engine.model.wire import CallPurpose, ModelRequest, OnDelta, encoded
from bot.engine.run.spend import TurnSpend

OVERFLOW_RETRIES = 2  # a retry after compacting; a second, squeezed harder, if the first still overflowed


def prompt_size(fitted: FittedPrompt) -> int:
    """The prompt's messages as sent, in bytes of JSON (each message's encoding is cached): what a retry
    after an overflow must have made smaller."""
    return sum(len(encoded(m)) for m in fitted.messages)


class Charged(Protocol):
    """What a call is charged to: the turn that made it (`state.TurnState`)."""

    def charge(self, model: str, usage: Usage) -> None: ...


@dataclass(frozen=True, slots=True)
class CallSettings:
    """What every call of one turn shares: the model, its sampling, where attempts and text go."""

    model: str
    temperature: float | None
    report: OnAttempt  # each attempt, to the turn's hooks
    delta: OnDelta | None = None  # the reply's text as it streams (turn and final calls only)
    summary_words: int = 400
    spend: TurnSpend | None = None  # the spend caps the turn runs under (spend.py): checked before every call


class ModelCalls:
    """One turn's model calls. `system` (the system prompt with memory) is built once per turn; `window`
    holds the thread as the turn sees it (its summary moves on when the thread is compacted). Plan mode
    shares one between its planning calls and its steps; each names the state it is charged to."""

    def __init__(self, model: RetryingModel, settings: CallSettings, system: Message, window: ThreadWindow) -> None:
        self.model, self.settings, self.system, self.window = model, settings, system, window
        self._compactor = Compactor(self._summary_call, settings.model, window.counter, settings.summary_words)

    async def complete(self, messages: Sequence[Message], schemas: tuple[dict[str, Any], ...] = (),
                       purpose: CallPurpose = "turn", *, charge: Charged, stream: bool = True) -> ModelResponse:
        """One call on `messages` after the thread (and the system prompt), fitted to the window."""
        window, compact = self.window, self._compactor
        await REPLIES.pace()  # a burst of turns building their requests at once is spread out (pacing.py)
        fitted: FittedPrompt = await window.prepare(self.system, messages, schemas, compact)
        for attempt in range(OVERFLOW_RETRIES + 1):
            request = ModelRequest(self.settings.model, fitted.messages, schemas, self.settings.temperature, purpose)
            try:
                response = await self._send(request, charge, stream)
            except ContextOverflow as err:
                if attempt == OVERFLOW_RETRIES:
                    raise
                await window.recover(self.system, fitted, err.window, err.prompt_tokens, compact)
                smaller = await window.prepare(self.system, messages, schemas, compact)
                if prompt_size(smaller) >= prompt_size(fitted):
                    raise  # nothing could be cut: the same prompt again would only be refused again
                fitted = smaller
                continue
            window.observe(fitted, response.usage.prompt_tokens)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def _summary_call(self, request: ModelRequest) -> ModelResponse:
        """Compaction's call: its prompt is sized by the compactor itself, and it is not charged to the turn
        (`turns` tokens and the budgets count the turn's own calls; `llm_calls` has every call)."""
        return await self._send(request, None, stream=False)

    async def _send(self, request: ModelRequest, charge: Charged | None, stream: bool) -> ModelResponse:
        spend = self.settings.spend
        if spend is not None:
            await spend.check()  # SpendReached: a cap is reached, the turn makes no more calls
        response = await self.model.complete(request, self.settings.report, self.settings.delta if stream else None)
        if spend is not None:
            spend.charge(self.settings.model, response.usage)
        if charge is not None:
            charge.charge(self.settings.model, response.usage)
        return response
