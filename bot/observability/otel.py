"""OpenTelemetry traces out (docs/observability.md): one GenAI span tree per turn, exported over OTLP.

Imported only when an OTLP endpoint is configured (`bot/observability/tracing.py` decides); nothing else in
yokebot imports the SDK. The spans follow the GenAI semantic conventions:

    invoke_agent <agent>                 the turn (its trace id is the turn id: bot/observability/traceparent.py)
    ├─ chat <model>                      each model attempt (a retry is one more); `traceparent` went out with it
    ├─ compaction <model> ─ chat <model> a summary call that made room in the context window
    ├─ plan_step <n>                     a `mode: plan` step; its calls are its children
    └─ execute_tool <tool>               each tool call
       └─ approval <tool>                the wait for a human's decision

Everything is a turn hook (`SpanHooks`), fed by the events the loop already tells; the hooks only create
spans. Export runs on the SDK's BatchSpanProcessor thread with a bounded queue: an exporter that is down or
slow costs a turn nothing, and what could not be sent is counted (`yokebot_otel_spans_dropped_total`).

Content (prompts, answers, tool arguments and results) is exported only with
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`. Whatever a span carries, content or not, leaves
through `RedactingExporter`: every string in it (its name, attributes, events, links, status and resource)
passes the secret redactor there, so a span the hooks make, or a name the model made up, cannot skip it."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import Attributes, AttributeValue

from bot.engine.errors import ApprovalPending, ConfigError
from bot.engine.messages import GuardEvent, Message, ToolCall, ToolResult, TurnOutcome
from bot.engine.model import ModelAttempt
from bot.engine.run import ApprovalDecision, ApprovalGate, ApprovalRequest, RunContext, TurnHooks
from bot.engine.service import CURRENT_TURN
from bot.observability.traceparent import TOOL_CALL, trace_id_for, traceparent
from bot.redact import cut

log = logging.getLogger(__name__)

PROVIDER = "openai"  # the API flavour spoken (gen_ai.provider.name); server.address says who answered
FLUSH_SECONDS = 5.0  # what closing the app waits at most for spans still queued (an exporter that hangs)
OnDrop = Callable[[str, int], None]  # (reason, spans): queue_full | export_failed


class TurnIds(IdGenerator):
    """Random ids, except the ones the span hooks ask for: a turn's trace id and a model call's span id
    (chosen before the call, to send in its `traceparent`). Set and used within one synchronous block."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self.trace_id: int | None = None
        self.span_id: int | None = None

    def generate_trace_id(self) -> int:
        return self.trace_id or self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        return self.span_id or self._random.generate_span_id()

    def random_span_id(self) -> int:
        return self._random.generate_span_id()

    def is_trace_id_random(self) -> bool:
        return False  # a turn id may be anything its caller chose


class CountingExporter(SpanExporter):
    """The real exporter; a batch it could not deliver is counted as dropped."""

    def __init__(self, inner: SpanExporter, on_drop: OnDrop) -> None:
        self.inner, self.on_drop = inner, on_drop
        self.pending = 0  # spans in the processor's queue (see CountingProcessor)
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.lock:
            self.pending = max(0, self.pending - len(spans))
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter must not raise; if it does, the spans are lost all the same
            log.warning("the OTLP exporter failed", exc_info=True)
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self.on_drop("export_failed", len(spans))
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class RedactingExporter(SpanExporter):
    """The one point every span passes on its way out: a copy of it whose every string (name, attribute keys
    and values, lists too, events, links, status description, resource) went through the redactor, on the
    export thread (not the event loop). The SDK's attribute length limits (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT,
    OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT) are applied here, after the redactor, by `cut`: the SDK cuts when an
    attribute is set, and half a token is a token no pattern recognises (the provider is built without them)."""

    def __init__(self, inner: SpanExporter, redact: Callable[[str], str], limits: SpanLimits) -> None:
        self.inner, self.redact = inner, redact
        self.span_length, self.length = limits.max_span_attribute_length, limits.max_attribute_length

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        resources: dict[int, Resource] = {}  # one provider, one resource: redacted once a batch
        return self.inner.export([self._span(span, resources) for span in spans])

    def _span(self, span: ReadableSpan, resources: dict[int, Resource]) -> ReadableSpan:
        status = span.status
        if status.description:
            status = Status(status.status_code, self._text(status.description))
        resource = resources.get(id(span.resource))
        if resource is None:
            resource = resources[id(span.resource)] = Resource(
                self._attributes(span.resource.attributes, None), span.resource.schema_url)
        events = [Event(self._text(e.name), self._attributes(e.attributes, self.length), e.timestamp)
                  for e in span.events]
        links = [Link(link.context, self._attributes(link.attributes, self.length)) for link in span.links]
        attributes = self._attributes(span.attributes, self.span_length)
        attributes.dropped = span.dropped_attributes
        return ReadableSpan(
            self._text(span.name), span.context, span.parent, resource, attributes,
            self._bounded(events, span.dropped_events), self._bounded(links, span.dropped_links), span.kind,
            status=status, start_time=span.start_time, end_time=span.end_time,
            instrumentation_scope=span.instrumentation_scope)

    def _text(self, text: str, length: int | None = None) -> str:
        return self.redact(text) if length is None else cut(text, length, self.redact)[0]

    def _value(self, value: AttributeValue, length: int | None) -> AttributeValue:
        if isinstance(value, str):
            return self._text(value, length)
        if isinstance(value, Sequence) and not isinstance(value, bytes):
            return tuple(self._text(v, length) if isinstance(v, str) else v for v in value)
        return value

    def _attributes(self, attributes: Attributes, length: int | None) -> BoundedAttributes:
        found = attributes or {}
        kept = BoundedAttributes(None, {self.redact(k): self._value(v, length) for k, v in found.items()})
        kept.dropped = getattr(found, "dropped", 0)  # the SDK's count of attributes it dropped (limits)
        return kept

    @staticmethod
    def _bounded(items: Sequence[Any], dropped: int) -> BoundedList[Any]:
        bounded = BoundedList[Any](None)
        for item in items:
            bounded.append(item)
        bounded.dropped = dropped  # what the SDK dropped (OTEL_SPAN_EVENT_COUNT_LIMIT...), still told
        return bounded

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class CountingProcessor(BatchSpanProcessor):
    """BatchSpanProcessor whose full queue (it drops the oldest span) is counted. The queue's length is
    tracked here from what goes in (`on_end`) and what the exporter takes out, through its public faces."""

    def __init__(self, exporter: CountingExporter, on_drop: OnDrop) -> None:
        self.capacity = int(os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE") or 2048)  # the SDK's default, and its variable
        super().__init__(exporter, max_queue_size=self.capacity)
        self.counting, self.on_drop = exporter, on_drop

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None and span.context.trace_flags.sampled:
            with self.counting.lock:
                full = self.counting.pending >= self.capacity
                if not full:
                    self.counting.pending += 1
            if full:
                self.on_drop("queue_full", 1)
        super().on_end(span)


def resource(version: str) -> Resource:
    """The standard variables (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) win; `yokebot` when unnamed."""
    found = Resource.create({"service.version": version})
    if str(found.attributes.get("service.name", "")).startswith("unknown_service"):
        found = found.merge(Resource({"service.name": "yokebot"}))
    return found


@dataclass
class _Turn:
    root: Span
    tools: dict[str, Span] = field(default_factory=lambda: dict[str, Span]())
    step: Span | None = None
    pending: tuple[int, int] | None = None  # (span id, start ns) of the model call whose headers went out

    @property
    def parent(self) -> Span:
        return self.step or self.root


def _parts(message: Message, redact: Callable[[str], str]) -> dict[str, Any]:
    """One message in the conventions' `parts` shape (gen_ai.input.messages / output.messages). Every string
    is redacted before it is JSON: escaped, `"token": "…"` becomes a shape the redactor (which RedactingExporter
    runs again) no longer sees."""
    parts: list[dict[str, Any]] = []
    if message.role == "tool":
        call_id = message.tool_call_id and redact(message.tool_call_id)
        parts.append({"type": "tool_call_response", "id": call_id, "result": redact(message.content)})
    elif message.content:
        parts.append({"type": "text", "content": redact(message.content)})
    for call in message.tool_calls:
        parts.append({"type": "tool_call", "id": redact(call.id), "name": redact(call.name),
                      "arguments": redact(call.arguments)})
    return {"role": message.role, "parts": parts}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


class SpanHooks(TurnHooks):
    """The turn hooks that make the spans. `content`: export prompts, answers, arguments and results
    (redacted first); `server`: the model endpoint (server.address / server.port)."""

    def __init__(self, tracer: trace.Tracer, ids: TurnIds, redact: Callable[[str], str], *, content: bool,
                 default_model: str, server: str | None = None) -> None:
        self.tracer, self.ids, self.redact, self.content = tracer, ids, redact, content
        self.default_model = default_model
        self.server: dict[str, Any] = {}
        if server:
            url = urlsplit(server)
            if url.hostname:
                self.server["server.address"] = url.hostname
                self.server["server.port"] = url.port or (443 if url.scheme == "https" else 80)
        self.turns: dict[str, _Turn] = {}

    # --- helpers ---------------------------------------------------------------------------------------
    def _start(self, name: str, parent: Span | None, attributes: Mapping[str, Any], *, kind: SpanKind =
               SpanKind.INTERNAL, start: int | None = None, trace_id: int | None = None,
               span_id: int | None = None) -> Span:
        self.ids.trace_id, self.ids.span_id = trace_id, span_id
        try:
            context = trace.set_span_in_context(parent) if parent is not None else None
            return self.tracer.start_span(name, context, kind, dict(attributes), start_time=start)
        finally:
            self.ids.trace_id = self.ids.span_id = None

    def model_headers(self) -> dict[str, str]:
        """The `traceparent` of the model call about to be sent (the model client asks before each attempt):
        the span that `model_attempt` then records gets this span id."""
        run = CURRENT_TURN.get()
        turn = self.turns.get(run.turn_id) if run is not None else None
        if turn is None:
            return {}
        span_id = self.ids.random_span_id()
        turn.pending = (span_id, time.time_ns())
        ctx = turn.root.get_span_context()
        return {"traceparent": traceparent(ctx.trace_id, span_id, ctx.trace_flags.sampled)}

    # --- the turn ----------------------------------------------------------------------------------------
    async def turn_started(self, run: RunContext, text: str) -> None:
        attributes = self._root_attributes(run)
        if self.content:
            attributes["gen_ai.input.messages"] = _json([_parts(Message.user(text), self.redact)])
        self._open(run, attributes)

    def _root_attributes(self, run: RunContext) -> dict[str, Any]:
        scope = run.scope
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": run.agent,
            "gen_ai.provider.name": PROVIDER, "gen_ai.system": PROVIDER,
            "gen_ai.request.model": run.profile.model or self.default_model,
            "gen_ai.conversation.id": run.session_id, "session.id": run.session_id,
            "yokebot.turn.id": run.turn_id, "yokebot.trigger": run.trigger, "yokebot.platform": scope.platform,
            "yokebot.channel.id": scope.channel, "yokebot.thread.id": scope.thread,
        }
        if scope.user:
            attributes["user.id"] = scope.user
        return attributes

    def _open(self, run: RunContext, attributes: dict[str, Any]) -> None:
        """The turn's root span; its trace id comes from the turn id, so a resumed turn's span joins it. A
        sub-agent's turn (docs/delegation.md) is a child of its parent's `execute_tool delegate` span: one trace."""
        d = run.delegation
        if d is not None and d.parent_turn is not None:
            attributes["yokebot.parent_turn.id"] = d.parent_turn
            parent = self.turns.get(d.parent_turn)
            call = parent.tools.get(d.parent_call or "") if parent is not None else None
            if call is not None:
                self.turns[run.turn_id] = _Turn(self._start(f"invoke_agent {run.agent}", call, attributes))
                return
        root = self._start(f"invoke_agent {run.agent}", None, attributes, trace_id=trace_id_for(run.turn_id))
        self.turns[run.turn_id] = _Turn(root)

    async def turn_parked(self, run: RunContext, approvals: tuple[int, ...]) -> None:
        """The turn's span ends here (exported, not held while a human decides, perhaps for hours, perhaps
        after this process is gone); its resumption opens another span in the same trace."""
        turn = self.turns.pop(run.turn_id, None)
        if turn is None:
            return
        for span in [*turn.tools.values(), *([turn.step] if turn.step else [])]:
            span.end()
        turn.root.set_attributes({"yokebot.turn.status": "parked",
                                  "yokebot.turn.approvals": [str(a) for a in approvals]})
        turn.root.end()

    async def turn_resumed(self, run: RunContext) -> None:
        self._open(run, {**self._root_attributes(run), "yokebot.turn.resumed": True})

    async def turn_finished(self, run: RunContext, outcome: TurnOutcome) -> None:
        turn = self.turns.pop(run.turn_id, None)
        if turn is None:
            return
        for span in [*turn.tools.values(), *([turn.step] if turn.step else [])]:  # cut short: cancelled
            span.set_status(Status(StatusCode.ERROR, "the turn ended first"))
            span.end()
        root, usage = turn.root, outcome.usage
        root.set_attributes({"gen_ai.usage.input_tokens": usage.prompt_tokens,
                             "gen_ai.usage.output_tokens": usage.completion_tokens,
                             "yokebot.turn.status": outcome.status, "yokebot.turn.stopped_by": outcome.stopped_by,
                             "yokebot.turn.iterations": outcome.iterations})
        if self.content and outcome.answer:
            root.set_attribute("gen_ai.output.messages", _json([_parts(Message.assistant(outcome.answer),
                                                                       self.redact)]))
        if outcome.error:
            root.set_attribute("error.type", outcome.stopped_by if outcome.stopped_by != "answer" else "_OTHER")
            root.set_status(Status(StatusCode.ERROR, self.redact(outcome.error)))
        root.end()

    # --- model calls -------------------------------------------------------------------------------------
    async def model_attempt(self, run: RunContext, attempt: ModelAttempt) -> None:
        turn = self.turns.get(run.turn_id)
        if turn is None:
            return
        end = time.time_ns()
        span_id, start = turn.pending or (None, end - int(attempt.latency_ms * 1e6))
        turn.pending = None
        request, parent = attempt.request, turn.parent
        if request.purpose == "compaction":  # the summary call is told as a step of its own
            parent = self._start(f"compaction {request.model}", parent,
                                 {"yokebot.compaction.attempt": attempt.attempt}, start=start)
        span = self._start(f"chat {request.model}", parent, self._chat(run, attempt), kind=SpanKind.CLIENT,
                           start=start, span_id=span_id)
        if attempt.error is not None:
            span.set_attribute("error.type", attempt.error.code or "_OTHER")
            span.set_status(Status(StatusCode.ERROR, self.redact(str(attempt.error))))
        span.end(end)
        if parent is not turn.parent:
            if attempt.error is not None:
                parent.set_status(Status(StatusCode.ERROR, self.redact(str(attempt.error))))
            parent.end(end)

    def _chat(self, run: RunContext, attempt: ModelAttempt) -> dict[str, Any]:
        request = attempt.request
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": PROVIDER, "gen_ai.system": PROVIDER,
            "gen_ai.request.model": request.model, "gen_ai.conversation.id": run.session_id,
            "yokebot.attempt": attempt.attempt, "yokebot.purpose": request.purpose, **self.server,
        }
        if request.temperature is not None:
            attributes["gen_ai.request.temperature"] = request.temperature
        response = attempt.response
        if response is not None:
            attributes.update({"gen_ai.response.model": response.model,
                               "gen_ai.usage.input_tokens": response.usage.prompt_tokens,
                               "gen_ai.usage.output_tokens": response.usage.completion_tokens})
            if response.finish_reason:
                attributes["gen_ai.response.finish_reasons"] = (response.finish_reason,)
        if self.content:
            system = [m for m in request.messages if m.role == "system"]
            if system:
                attributes["gen_ai.system_instructions"] = _json(
                    [{"type": "text", "content": self.redact(m.content)} for m in system])
            attributes["gen_ai.input.messages"] = _json(
                [_parts(m, self.redact) for m in request.messages if m.role != "system"])
            if response is not None:
                out = {**_parts(response.message, self.redact),
                       "finish_reason": response.finish_reason and self.redact(response.finish_reason)}
                attributes["gen_ai.output.messages"] = _json([out])
        return attributes

    # --- tool calls --------------------------------------------------------------------------------------
    async def tool_started(self, run: RunContext, call: ToolCall) -> None:
        turn = self.turns.get(run.turn_id)
        if turn is None:
            return
        attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
                                      "gen_ai.tool.call.id": call.id, "gen_ai.tool.type": "function",
                                      "gen_ai.conversation.id": run.session_id}
        if self.content:
            attributes["gen_ai.tool.call.arguments"] = self.redact(call.arguments)
        span = self._start(f"execute_tool {call.name}", turn.parent, attributes)
        turn.tools[call.id] = span
        ctx = span.get_span_context()
        # this task's outgoing calls (MCP over HTTP) carry the tool span's context
        TOOL_CALL.set(traceparent(ctx.trace_id, ctx.span_id, ctx.trace_flags.sampled))

    async def tool_finished(self, run: RunContext, result: ToolResult) -> None:
        TOOL_CALL.set(None)
        turn = self.turns.get(run.turn_id)
        span = turn.tools.pop(result.call_id, None) if turn is not None else None
        if span is None:
            return
        span.set_attributes({"yokebot.tool.status": result.status, "yokebot.tool.attempts": result.attempts})
        if result.reason:  # the sandbox's denial, who approved or denied
            span.set_attribute("yokebot.tool.reason", self.redact(result.reason))
        if self.content and result.status == "ok":
            span.set_attribute("gen_ai.tool.call.result", self.redact(result.content))
        if result.status != "ok":
            span.set_attribute("error.type", result.status)
            span.set_status(Status(StatusCode.ERROR, self.redact(result.reason or result.status)))
        span.end()

    async def guardrail(self, run: RunContext, event: GuardEvent) -> None:
        """A span event on the turn's current span (a plan step's, else the turn's): the rule and what it did;
        the excerpt (the match already replaced by its mark) only when content is captured."""
        turn = self.turns.get(run.turn_id)
        if turn is None:
            return
        attributes = {"yokebot.guardrail.stage": event.stage, "yokebot.guardrail.rule": self.redact(event.rule),
                      "yokebot.guardrail.type": event.type, "yokebot.guardrail.action": event.action}
        if event.kind:
            attributes["yokebot.guardrail.kind"] = event.kind
        if self.content:
            attributes["yokebot.guardrail.excerpt"] = self.redact(event.excerpt)
        turn.parent.add_event("yokebot.guardrail", attributes)

    def approval(self, run: RunContext, request: ApprovalRequest, decision: ApprovalDecision | None,
                 start: int) -> None:
        """The wait for a human (from `TracedApprovals`), a child of its tool call's span."""
        turn = self.turns.get(run.turn_id)
        if turn is None:
            return
        parent = turn.tools.get(request.call_id, turn.parent)
        attributes: dict[str, Any] = {"gen_ai.tool.name": request.tool, "gen_ai.tool.call.id": request.call_id,
                                      "yokebot.approval.verdict": decision.verdict if decision else "error"}
        if decision is not None and decision.by:
            attributes["yokebot.approval.by"] = decision.by
        span = self._start(f"approval {request.tool}", parent, attributes, start=start)
        if decision is None or not decision.approved:
            span.set_status(Status(StatusCode.ERROR, decision.verdict if decision else "the wait failed"))
        span.end()

    # --- plan mode ---------------------------------------------------------------------------------------
    async def plan_step_started(self, run: RunContext, number: int, text: str) -> None:
        turn = self.turns.get(run.turn_id)
        if turn is None:
            return
        attributes: dict[str, Any] = {"yokebot.plan.step": number}
        if self.content:
            attributes["yokebot.plan.step.text"] = self.redact(text)
        turn.step = self._start(f"plan_step {number}", turn.root, attributes)

    async def plan_step_finished(self, run: RunContext, number: int, status: str) -> None:
        turn = self.turns.get(run.turn_id)
        if turn is None or turn.step is None:
            return
        turn.step.set_attribute("yokebot.plan.step.status", status)
        if status != "done":
            turn.step.set_status(Status(StatusCode.ERROR, status))
        turn.step.end()
        turn.step = None


class TracedApprovals:
    """An ApprovalGate that records the wait for a decision as a span, then answers as the inner gate does."""

    def __init__(self, inner: ApprovalGate, spans: SpanHooks) -> None:
        self.inner, self.spans = inner, spans

    async def decide(self, run: RunContext, request: ApprovalRequest) -> ApprovalDecision:
        start, decision = time.time_ns(), None
        try:
            decision = await self.inner.decide(run, request)
            return decision
        except ApprovalPending:  # the turn parks: no wait to trace in this process
            start = 0
            raise
        finally:
            if start:
                self._record(run, request, decision, start)

    def _record(self, run: RunContext, request: ApprovalRequest, decision: ApprovalDecision | None,
                start: int) -> None:
        try:
            self.spans.approval(run, request, decision, start)
        except Exception:
            log.warning("could not trace an approval wait", exc_info=True)

    async def ran(self, decision: ApprovalDecision, status: str) -> None:
        await self.inner.ran(decision, status)


class Tracing:
    """The app's tracer provider and its span hooks; `close` sends what is queued (at most FLUSH_SECONDS)."""

    def __init__(self, exporter: SpanExporter, redact: Callable[[str], str], *, content: bool, default_model: str,
                 server: str | None, version: str, on_drop: OnDrop | None = None) -> None:
        self.dropped: dict[str, int] = {"queue_full": 0, "export_failed": 0}
        # the exporter's retries of an unreachable collector are a WARNING line each: its final failure (ERROR)
        # and our count say it once
        sdk_log = logging.getLogger("opentelemetry.exporter")
        sdk_log.setLevel(max(sdk_log.getEffectiveLevel(), logging.ERROR))
        self._on_drop = on_drop
        self.ids = TurnIds()
        # no atexit hook: a hanging exporter must not hold the process at exit (close bounds the flush)
        # attribute values are cut after the redactor, in RedactingExporter: the provider keeps them whole
        whole = SpanLimits(max_attribute_length=SpanLimits.UNSET, max_span_attribute_length=SpanLimits.UNSET)
        self.provider = TracerProvider(resource=resource(version), id_generator=self.ids, shutdown_on_exit=False,
                                       span_limits=whole)
        redacting = RedactingExporter(exporter, redact, SpanLimits())  # the limits the environment sets
        self.processor = CountingProcessor(CountingExporter(redacting, self._drop), self._drop)
        self.provider.add_span_processor(self.processor)
        self.hooks = SpanHooks(self.provider.get_tracer("yokebot", version), self.ids, redact, content=content,
                               default_model=default_model, server=server)

    def _drop(self, reason: str, spans: int) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + spans
        if self._on_drop is not None:
            self._on_drop(reason, spans)

    def model_headers(self) -> dict[str, str]:
        return self.hooks.model_headers()

    def gate(self, inner: ApprovalGate) -> ApprovalGate:
        return TracedApprovals(inner, self.hooks)

    async def close(self, seconds: float = FLUSH_SECONDS) -> None:
        """Export what is queued and stop; on a daemon thread, waited for at most `seconds`."""
        import asyncio

        done = asyncio.Event()
        loop = asyncio.get_running_loop()

        def shutdown() -> None:
            try:
                self.provider.shutdown()
            except Exception:
                log.warning("the trace exporter did not shut down cleanly", exc_info=True)
            finally:
                try:
                    loop.call_soon_threadsafe(done.set)
                except RuntimeError:  # the loop is gone: nobody waits any more
                    pass

        threading.Thread(target=shutdown, name="otel-shutdown", daemon=True).start()
        try:
            await asyncio.wait_for(done.wait(), seconds)
        except TimeoutError:
            log.warning("the OTLP endpoint did not take the last spans within %g s (is the collector up?); they are "
                        "dropped", seconds)


def exporter(endpoint: str, protocol: str) -> SpanExporter:
    """The OTLP span exporter for `protocol` (http/protobuf, or grpc when its package is installed); headers,
    timeout, compression and certificates come from the standard OTEL_EXPORTER_OTLP_* variables."""
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # pyright: ignore[reportMissingImports]
                OTLPSpanExporter as GrpcExporter,  # pyright: ignore[reportUnknownVariableType]
            )
        except ImportError:
            raise ConfigError("OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs the gRPC exporter: pip install "
                              "opentelemetry-exporter-otlp-proto-grpc (or use http/protobuf).") from None
        return GrpcExporter(endpoint=endpoint)  # pyright: ignore[reportUnknownVariableType]  (an optional package)
    if protocol not in ("http/protobuf", ""):
        raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported; use http/protobuf or grpc.")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=endpoint)
