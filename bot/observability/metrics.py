"""Prometheus metrics of one bot. Each App owns its own CollectorRegistry (tests build several apps;
the process-global default registry would mix their counts and refuse duplicate names)."""

from __future__ import annotations

from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

TURN_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300)
CALL_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.turns = Counter("yokebot_turns", "Finished turns.", ["agent", "trigger", "status"], registry=r)
        self.turns_in_progress = Gauge("yokebot_turns_in_progress", "Turns running now.", registry=r)
        self.turn_seconds = Histogram("yokebot_turn_duration_seconds", "Turn latency, request to answer.",
                                      ["agent"], buckets=TURN_BUCKETS, registry=r)
        self.model_calls = Counter("yokebot_model_calls", "Model call attempts (each retry counts).",
                                   ["agent", "model", "outcome"], registry=r)
        self.model_seconds = Histogram("yokebot_model_call_duration_seconds", "Model call latency.",
                                       ["model"], buckets=CALL_BUCKETS, registry=r)
        self.tokens = Counter("yokebot_model_tokens", "Tokens used by model calls.",
                              ["agent", "model", "kind"], registry=r)
        self.tool_calls = Counter("yokebot_tool_calls", "Tool calls by outcome.", ["agent", "tool", "status"],
                                  registry=r)
        self.tool_seconds = Histogram("yokebot_tool_call_duration_seconds", "Tool call duration.", ["tool"],
                                      buckets=CALL_BUCKETS, registry=r)
        self.adapter_events = Counter("yokebot_adapter_events", "Events received by the chat adapters.",
                                      ["platform", "kind"], registry=r)
        self.otel_dropped = Counter("yokebot_otel_spans_dropped", "Trace spans not delivered to the OTLP "
                                    "endpoint (queue_full: the exporter fell behind; export_failed).", ["reason"],
                                    registry=r)
        self.schedule_runs = Counter("yokebot_schedule_runs", "Scheduled agent runs.", ["schedule", "status"],
                                     registry=r)

        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    def child(self, metric: Counter | Histogram, *values: str) -> Any:
        """`metric.labels(*values)`, kept: the label set of a hot path (a turn's agent, model, tool) is looked up
        once, not validated and joined again for every model call and tool call. As many entries as the
        metric has label sets, which it keeps anyway."""
        key = (id(metric), values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    # --- for adapters and the scheduler (they hold `app.metrics`) -------------------------------------
    def adapter_event(self, platform: str, kind: str) -> None:
        """Count one inbound platform event (`platform`: its registry name, or `alerts`), e.g. a `mention`, a
        `duplicate`."""
        self.adapter_events.labels(platform=platform, kind=kind).inc()

    def schedule_run(self, schedule: str, status: str) -> None:
        """Count one scheduled run, e.g. `("ops/nightly", "ok")`; status ok | error | skipped | missed."""
        self.schedule_runs.labels(schedule=schedule, status=status).inc()

    def otel_drop(self, reason: str, spans: int) -> None:
        """Count spans the trace exporter lost (called from its thread; prometheus-client counters are safe)."""
        self.otel_dropped.labels(reason=reason).inc(spans)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def value(self, name: str, **labels: str) -> float:
        """One sample's current value (0 when absent): for tests and `yokebot` diagnostics."""
        found = self.registry.get_sample_value(name, labels)
        return found or 0.0
