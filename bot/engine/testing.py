"""For tests of the engine: a scripted in-process model (no HTTP) and a hook that records every event
(no SQL). The real-SDK-over-loopback tests (tests/fakes/openai_server.py) check the wire; these check the
engine's logic quickly. Shipped with the code, like openai-agents' `testing/model.py`."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.engine.context.prompt import truncate_history
from bot.engine.messages import Message, ModelResponse, Thread, ToolCall, ToolResult, TurnOutcome, Usage
from bot.engine.model.wire import ChatModel, ModelAttempt, ModelRequest
from bot.engine.ports import SessionRecord
from bot.engine.run.context import RunContext
from bot.engine.run.hooks import TurnHooks

# A reply: final text, the tool calls to ask for, a whole response, or an exception to raise.
Reply = str | Sequence[ToolCall] | ModelResponse | BaseException
Script = Reply | Callable[[ModelRequest], Reply]


def call(name: str, args: dict[str, Any] | None = None, call_id: str | None = None) -> ToolCall:
    """A tool call as a model would write it (`arguments` is JSON text)."""
    return ToolCall(call_id or f"call_{name}", name, json.dumps(args or {}))


class ScriptedModel(ChatModel):
    """A ChatModel that answers from a script, one entry per model call, and keeps every request.
    An entry is a Reply or a function of the request that returns one."""

    def __init__(self, *script: Script, usage: Usage = Usage(10, 5), model: str = "scripted") -> None:
        self.script: list[Script] = list(script)
        self.usage, self.model = usage, model
        self.requests: list[ModelRequest] = []

    def reply(self, text: str) -> ScriptedModel:
        self.script.append(text)
        return self

    def calls(self, *calls: ToolCall) -> ScriptedModel:
        self.script.append(calls)
        return self

    def fail(self, error: BaseException) -> ScriptedModel:
        self.script.append(error)
        return self

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if not self.script:
            raise AssertionError(f"ScriptedModel: no reply scripted for model call {len(self.requests)}")
        entry = self.script.pop(0)
        reply = entry(request) if callable(entry) else entry
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, ModelResponse):
            return reply
        if isinstance(reply, str):
            return ModelResponse(Message.assistant(reply), self.usage, "stop", self.model)
        return ModelResponse(Message.assistant("", tuple(reply)), self.usage, "tool_calls", self.model)


@dataclass
class RecordingHooks(TurnHooks):
    """Keeps every event of every turn in memory: `events` in order as (kind, value)."""

    events: list[tuple[str, Any]] = field(default_factory=lambda: list[tuple[str, Any]]())

    def of(self, kind: str) -> list[Any]:
        return [value for k, value in self.events if k == kind]

    @property
    def kinds(self) -> list[str]:
        return [k for k, _ in self.events]

    @property
    def messages(self) -> list[Message]:
        return self.of("message")

    @property
    def attempts(self) -> list[ModelAttempt]:
        return self.of("model_attempt")

    @property
    def tool_results(self) -> list[ToolResult]:
        return self.of("tool_finished")

    @property
    def outcomes(self) -> list[TurnOutcome]:
        return self.of("turn_finished")

    async def turn_started(self, run: RunContext, text: str) -> None:
        self.events.append(("turn_started", text))

    async def text_delta(self, run: RunContext, text: str) -> None:
        self.events.append(("text_delta", text))

    async def message_appended(self, run: RunContext, message: Message) -> None:
        self.events.append(("message", message))

    async def model_attempt(self, run: RunContext, attempt: ModelAttempt) -> None:
        self.events.append(("model_attempt", attempt))

    async def tool_started(self, run: RunContext, call: ToolCall) -> None:
        self.events.append(("tool_started", call))

    async def tool_finished(self, run: RunContext, result: ToolResult) -> None:
        self.events.append(("tool_finished", result))

    async def plan_made(self, run: RunContext, plan: dict[str, Any]) -> None:
        self.events.append(("plan", plan))

    async def turn_finished(self, run: RunContext, outcome: TurnOutcome) -> None:
        self.events.append(("turn_finished", outcome))


class MemorySessions(TurnHooks):
    """An in-memory SessionStore that is also the hook recording each turn's messages into its session's
    history: AgentService runs on it with no database."""

    def __init__(self) -> None:
        self.sessions: dict[str, SessionRecord] = {}
        self.messages: dict[str, list[Message]] = {}

    async def session_for(self, platform: str, channel: str, thread: str, agent: str) -> SessionRecord:
        for record in self.sessions.values():
            if (record.platform, record.channel, record.thread) == (platform, channel, thread):
                return record
        record = SessionRecord(f"s{len(self.sessions) + 1}", platform, channel, thread, agent)
        self.sessions[record.id] = record
        return SessionRecord(record.id, platform, channel, thread, agent, created=True)

    async def get_session(self, session_id: str) -> SessionRecord | None:
        return self.sessions.get(session_id)

    async def load_thread(self, session_id: str, max_turns: int) -> Thread:
        """No summaries here: the last `max_turns` turns, without ids (compacted in memory only)."""
        kept = truncate_history(self.messages.get(session_id, []), max_turns - 1) if max_turns > 0 else []
        return Thread.from_messages(kept)

    async def save_summary(self, session_id: str, turn_id: str, through_turn_id: str, text: str,
                           folded_turns: int) -> None:
        return None

    async def reset_thread(self, session_id: str, turn_id: str | None = None) -> None:
        self.messages[session_id] = []

    async def message_appended(self, run: RunContext, message: Message) -> None:
        self.messages.setdefault(run.session_id, []).append(message)
