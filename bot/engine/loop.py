"""The ReAct loop: the model decides, we run the tools it asks for, feed the results back, repeat.
Everything that happens is told to the turn's hooks; the loop itself records nothing.

Several tool calls in one model message run at the same time (the profile's `parallel_tool_calls: false`
turns that off); a tool that `runs_alone` (notify) waits for the calls before it and runs before those
after it. The results go back to the model in the order it asked; each call is told to the hooks when it
starts and when it finishes, with its own start and finish times."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from bot.engine import replies
from bot.engine.context import RunContext
from bot.engine.errors import ModelError
from bot.engine.executor import ToolExecutor
from bot.engine.hooks import ModelAttempt, TurnHooks
from bot.engine.messages import Message, ToolCall, ToolResult, TurnOutcome, Usage
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

        await add(Message.user(text))
        system = await self.prompts.system_message(profile, run.scope)
        while iterations < profile.max_iterations:
            iterations += 1
            prompt = self.prompts.assemble(system, profile, messages, tools)
            request = ModelRequest(profile.model or self.default_model, prompt.messages, prompt.tools,
                                   profile.temperature)
            try:
                response = await self.model.complete(request, report)
            except ModelError as err:
                answer = replies.model_failed(err)
                await add(Message.assistant(answer))
                return TurnOutcome(answer, iterations, usage, str(err), "error", tuple(results))
            usage += response.usage
            await add(response.message)
            if not response.message.tool_calls:
                return TurnOutcome(response.message.content, iterations, usage, None, "answer", tuple(results))
            for batch in self.batches(response.message.tool_calls, profile.parallel_tool_calls):
                for result in await self._run_batch(batch, run, hooks):
                    results.append(result)
                    await add(Message.tool(result.call_id, result.tool, result.content))
        answer = replies.iteration_limit(iterations, results)
        await add(Message.assistant(answer))
        return TurnOutcome(answer, iterations, usage, None, "iteration_limit", tuple(results))

    def batches(self, calls: Sequence[ToolCall], parallel: bool) -> list[list[ToolCall]]:
        """The calls in the model's order, cut into groups that may run at once: a call of a tool that
        runs alone is a group of its own; without `parallel` every call is."""
        groups: list[list[ToolCall]] = []
        last_alone = True
        for call in calls:
            alone = not parallel or self.executor.runs_alone(call.name)
            if alone or last_alone:
                groups.append([call])
            else:
                groups[-1].append(call)
            last_alone = alone
        return groups

    async def _run_batch(self, batch: list[ToolCall], run: RunContext, hooks: TurnHooks) -> list[ToolResult]:
        """Run the calls of one group at the same time; their results in the group's order. If one fails
        (a hook raised) or the turn is cancelled, the others are cancelled too."""

        async def one(call: ToolCall) -> ToolResult:
            await hooks.tool_started(run, call)
            result = await self.executor.execute(call, run)
            await hooks.tool_finished(run, result)
            return result

        if len(batch) == 1:
            return [await one(batch[0])]
        tasks = [asyncio.ensure_future(one(call)) for call in batch]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
