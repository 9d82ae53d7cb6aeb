"""Prometheus metrics of one bot. Each App owns its own CollectorRegistry (tests build several apps;
the process-global default registry would mix their counts and refuse duplicate names)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bot.engine.run import SpendCaps

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
        self.cost = Counter("yokebot_model_cost_usd", "Estimated cost of model calls in USD, from "
                            "YOKEBOT_MODEL_PRICES (models without a price are not counted).", ["agent", "model"],
                            registry=r)
        self.tool_calls = Counter("yokebot_tool_calls", "Tool calls by outcome.", ["agent", "tool", "status"],
                                  registry=r)
        self.tool_seconds = Histogram("yokebot_tool_call_duration_seconds", "Tool call duration.", ["tool"],
                                      buckets=CALL_BUCKETS, registry=r)
        self.adapter_events = Counter("yokebot_adapter_events", "Events received by the chat adapters.",
                                      ["platform", "kind"], registry=r)
        self.otel_dropped = Counter("yokebot_otel_spans_dropped", "Trace spans not delivered to the OTLP "
                                    "endpoint (queue_full: the exporter fell behind; export_failed).", ["reason"],
                                    registry=r)
        for reason in ("queue_full", "export_failed"):  # from 0: the first drop is an increase, and both show
            self.otel_dropped.labels(reason=reason)
        self.guardrail_events = Counter("yokebot_guardrail_events", "Guardrail decisions (docs/guardrails.md).",
                                        ["stage", "type", "action"], registry=r)
        self.schedule_runs = Counter("yokebot_schedule_runs", "Scheduled agent runs.", ["schedule", "status"],
                                     registry=r)
        # read from the database when scraped (bot/observability/backlog.py): the same on every instance
        self.inbox_items = Gauge("yokebot_inbox_items", "Open inbox items by state (claimed: waiting to start; "
                                 "running; parked: waiting for an approval).", ["state"], registry=r)
        self.inbox_oldest = Gauge("yokebot_inbox_oldest_age_seconds", "Age of the oldest open inbox item in each "
                                  "state, since it entered it (0: none).", ["state"], registry=r)
        self.inbox_lease = Gauge("yokebot_inbox_lease_seconds", "YOKEBOT_INBOX_LEASE_SECONDS: a claimed item "
                                 "nobody starts within it is taken over.", registry=r)
        self.approvals_waiting = Gauge("yokebot_approvals_waiting", "Approval requests nobody has decided yet.",
                                       registry=r)
        self.approvals_overdue = Gauge("yokebot_approvals_overdue", "Approval requests still pending past their "
                                       "timeout (they should have expired).", registry=r)

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

    def expect_models(self, models: Mapping[str, str]) -> None:
        """Start each agent's model-call and token series at 0 (agent -> its model): Prometheus sees the first
        failed call as an increase (a series born at 1 is not), which the error-ratio panel and alert need."""
        for agent, model in models.items():
            for outcome in ("ok", "error"):
                self.child(self.model_calls, agent, model, outcome)
            for kind in ("prompt", "completion"):
                self.child(self.tokens, agent, model, kind)

    def watch_spend(self, caps: SpendCaps) -> None:
        """Export `yokebot_spend_ratio{agent,period}` from the spend caps' figures, read when scraped."""
        self.registry.register(SpendRatios(caps))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def value(self, name: str, **labels: str) -> float:
        """One sample's current value (0 when absent): for tests and `yokebot` diagnostics."""
        found = self.registry.get_sample_value(name, labels)
        return found or 0.0


class SpendRatios(Collector):
    """`yokebot_spend_ratio{agent,period}`: what is spent over the cap, per agent (`*`: YOKEBOT_SPEND_DAILY_USD
    over every agent) and cap (`daily_cost`, `monthly_cost`, `daily_tokens`); an agent whose caps are per channel
    shows its highest channel. From the figures this process holds (read at most once a second per scope; a
    scrape asks for a read of those older than that, so it shows the database's figure one scrape later)."""

    def __init__(self, caps: SpendCaps) -> None:
        self.caps = caps

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("yokebot_spend_ratio", "Spent over the spend cap (1 = reached), per agent and "
                                   "cap.", labels=["agent", "period"])
        highest: dict[tuple[str, str], float] = {}
        for scope, kind, ratio in self.caps.ratios():
            key = (scope.agent or "*", kind)
            highest[key] = max(highest.get(key, 0.0), ratio)
        for (agent, kind), ratio in sorted(highest.items()):
            family.add_metric([agent, kind], ratio)
        yield family

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())
