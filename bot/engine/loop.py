"""The ReAct loop: the model decides, we run the tools it asks for, feed the results back, repeat.
Everything that happens is told to the turn's hooks; the loop itself records nothing."""

from __future__ import annotations

from bot.engine import replies
from bot.engine.context import RunContext
from bot.engine.errors import ModelError
from bot.engine.executor import ToolExecutor
from bot.engine.hooks import ModelAttempt, TurnHooks
from bot.engine.messages import Message, ToolResult, TurnOutcome, Usage
from bot.engine.prompt import PromptBuilder
from bot.engine.retrying import RetryingModel
from bot.engine.wire import ModelRequest


class ReActLoop:
    def __init__(self, model: RetryingModel, executor: ToolExecutor, prompts: PromptBuilder,
                 default_model: str) -> None:
        self.model, self.executor, self.prompts, self.default_model = model, executor, prompts, default_model

    async def run(self, run: RunContext, history: list[Message], text: str, hooks: TurnHooks) -> TurnOutcome:
        profile, tools = run.profile, self.executor.tools_for(run.profile)
        messages = list(history)
        results: list[ToolResult] = []
        usage, iterations = Usage(), 0

        async def add(message: Message) -> None:
            messages.append(message)
            await hooks.message_appended(run, message)

        async def report(attempt: ModelAttempt) -> None:
            await hooks.model_attempt(run, attempt)

        async def delta(fragment: str) -> None:
            await hooks.text_delta(run, fragment)

        await add(Message.user(text))
        system = await self.prompts.system_message(profile, run.scope)
        while iterations < profile.max_iterations:
            iterations += 1
            prompt = self.prompts.assemble(system, profile, messages, tools)
            request = ModelRequest(profile.model or self.default_model, prompt.messages, prompt.tools,
                                   profile.temperature)
            try:
                response = await self.model.complete(request, report, delta)
            except ModelError as err:
                answer = replies.model_failed(err)
                await add(Message.assistant(answer))
                return TurnOutcome(answer, iterations, usage, str(err), "error", tuple(results))
            usage += response.usage
            await add(response.message)
            if not response.message.tool_calls:
                return TurnOutcome(response.message.content, iterations, usage, None, "answer", tuple(results))
            for call in response.message.tool_calls:
                await hooks.tool_started(run, call)
                result = await self.executor.execute(call, run, iterations)
                results.append(result)
                await hooks.tool_finished(run, result)
                await add(Message.tool(call.id, call.name, result.content))
        answer = replies.iteration_limit(iterations, results)
        await add(Message.assistant(answer))
        return TurnOutcome(answer, iterations, usage, None, "iteration_limit", tuple(results))
