"""The guardrails of one turn (bot/engine/guard, docs/guardrails.md) where the run meets them: the model's
tool-call arguments (`calls`), its answer (`answer`), the streamed text (`stream`), and the copy of each model
response the audit keeps (`scrubbed`). Every decision is told to the hooks (`guardrail`): the recorder's
`guardrail_events` row, the metric, the span event. The input stage is the service's (before the turn's row
is written); the tool_result stage the executor's (within the result's cut)."""

from __future__ import annotations

from dataclasses import replace

from bot.engine.guard import Block, Secrets, StreamHold, Verdict, args_blocked, check, check_args, output_blocked
from bot.engine.messages import Message, ModelResponse, ToolCall, ToolResult
from bot.engine.model.wire import ModelAttempt
from bot.engine.run.context import RunContext
from bot.engine.run.hooks import TurnHooks
from bot.engine.spec.guardrails import Stage


class TurnGuard:
    def __init__(self, run: RunContext, hooks: TurnHooks, secrets: Secrets) -> None:
        self.run, self.hooks, self.secrets = run, hooks, secrets
        self.rails = run.profile.guardrails

    async def text(self, stage: Stage, text: str) -> Verdict:
        return await self.told(check(stage, self.rails.stage(stage), text, self.secrets))

    async def told(self, verdict: Verdict) -> Verdict:
        for event in verdict.events:
            await self.hooks.guardrail(self.run, event)
        return verdict

    async def calls(self, message: Message) -> tuple[Message, dict[str, ToolResult]]:
        """The `tool_args` stage over each call of a model reply: the reply with the arguments as they may be
        run and stored (redacted), and the calls a rule blocks, each with its observation (not run)."""
        calls: list[ToolCall] = []
        withheld: dict[str, ToolResult] = {}
        for call in message.tool_calls:
            verdict = await self.told(check_args(self.rails.tool_args, call.arguments, self.secrets))
            call = replace(call, arguments=verdict.text) if verdict.changed else call
            calls.append(call)
            if verdict.block is not None:
                withheld[call.id] = ToolResult(call.id, call.name, call.arguments, args_blocked(verdict.block),
                                               "denied", attempts=0, reason=_reason(verdict.block))
        changed = any(a is not b for a, b in zip(calls, message.tool_calls, strict=True))
        return (replace(message, tool_calls=tuple(calls)) if changed else message), withheld

    async def answer(self, message: Message) -> tuple[Message, Block | None]:
        """The `output` stage over the answer: redacted, or (blocked) replaced by one sentence."""
        verdict = await self.text("output", message.content)
        if verdict.block is not None:
            return Message.assistant(output_blocked(verdict.block)), verdict.block
        return (replace(message, content=verdict.text) if verdict.changed else message), None

    def scrub(self, stage: Stage, text: str) -> str:
        """`text` as a stage's rules let it pass, their decisions not told (a copy of a text they see elsewhere)."""
        return check(stage, self.rails.stage(stage), text, self.secrets).text

    def stream(self) -> StreamHold:
        return StreamHold(self.rails.output, self.secrets)

    def scrubbed(self, attempt: ModelAttempt) -> ModelAttempt:
        """The attempt as the audit and the spans keep it: the reply's text and arguments with what the output
        and tool_args rules redact or block replaced by marks (their decisions are told once, by the loop)."""
        response = attempt.response
        if response is None:
            return attempt
        msg = response.message
        content = check("output", self.rails.output, msg.content, self.secrets).text if msg.content else msg.content
        calls = tuple(replace(c, arguments=check_args(self.rails.tool_args, c.arguments, self.secrets).text)
                      for c in msg.tool_calls)
        if content == msg.content and all(a.arguments == b.arguments for a, b in zip(calls, msg.tool_calls,
                                                                                   strict=True)):
            return attempt
        return replace(attempt, response=ModelResponse(replace(msg, content=content, tool_calls=calls),
                                                       response.usage, response.finish_reason, response.model))


def _reason(block: Block) -> str:
    return f"blocked by the guardrail {block.label}"
