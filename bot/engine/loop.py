"""The ReAct loop: the model decides, we run the tools it asks for, feed the results back, repeat."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from bot.engine.errors import ModelError
from bot.engine.executor import RunContext, ToolExecutor
from bot.engine.messages import Message, ToolCall, ToolResult, Usage
from bot.engine.model import CallMeta, ChatModel, ModelRequest
from bot.engine.prompt import PromptBuilder


@dataclass(frozen=True, slots=True)
class LoopEvent:
    kind: str  # "model", "tool_start", "tool_end"
    iteration: int
    call: ToolCall | None = None
    result: ToolResult | None = None


Emit = Callable[[Message], Awaitable[None]]
Observe = Callable[[LoopEvent], Awaitable[None]]


@dataclass
class LoopResult:
    answer: str
    iterations: int = 0
    hit_iteration_limit: bool = False
    tool_results: list[ToolResult] = field(default_factory=lambda: list[ToolResult]())
    usage: Usage = field(default_factory=Usage)
    error: str | None = None


async def _noop(_: LoopEvent) -> None:
    return None


class ReActLoop:
    def __init__(self, model: ChatModel, executor: ToolExecutor, prompts: PromptBuilder, default_model: str) -> None:
        self.model, self.executor, self.prompts, self.default_model = model, executor, prompts, default_model

    async def run(
        self, run: RunContext, history: list[Message], text: str, emit: Emit, observe: Observe = _noop
    ) -> LoopResult:
        profile, tools = run.profile, self.executor.tools_for(run.profile)
        meta = CallMeta(run.session_id, run.turn_id, profile.name)
        messages = [*history, Message.user(text)]
        await emit(messages[-1])
        out = LoopResult(answer="")
        system = await self.prompts.system_message(profile, run.scope)
        while out.iterations < profile.max_iterations:
            out.iterations += 1
            prompt = self.prompts.assemble(system, profile, messages, tools)
            request = ModelRequest(profile.model or self.default_model, prompt.messages, prompt.tools,
                                   profile.temperature)
            try:
                response = await self.model.complete(request, meta)
            except ModelError as err:
                out.error = str(err)
                out.answer = f"Sorry, I could not finish this: {err}. Please try again later."
                await emit(Message.assistant(out.answer))
                return out
            out.usage += response.usage
            messages.append(response.message)
            await emit(response.message)
            await observe(LoopEvent("model", out.iterations))
            if not response.message.tool_calls:
                out.answer = response.message.content
                return out
            for call in response.message.tool_calls:
                await observe(LoopEvent("tool_start", out.iterations, call))
                result = await self.executor.execute(call, run, out.iterations)
                out.tool_results.append(result)
                messages.append(Message.tool(call.id, call.name, result.content))
                await emit(messages[-1])
                await observe(LoopEvent("tool_end", out.iterations, call, result))
        out.hit_iteration_limit = True
        out.answer = self._partial(out)
        await emit(Message.assistant(out.answer))
        return out

    @staticmethod
    def _partial(out: LoopResult) -> str:
        done = ", ".join(f"{r.tool} ({r.status})" for r in out.tool_results[-5:]) or "no tool calls"
        return (f"I stopped after {out.iterations} steps, the limit for this agent, before reaching a final "
                f"answer. Last steps: {done}. Ask me to continue, or narrow the question.")
