"""An OTLP/HTTP trace receiver on 127.0.0.1: `POST /v1/traces` with an `ExportTraceServiceRequest` protobuf
(opentelemetry-proto), decoded into plain `Span`s, as a collector (Jaeger, Tempo, Langfuse, Phoenix) reads
them. `hang` makes it accept a request and never answer (an exporter that is slow or stuck);
`status` answers every request with that HTTP status (a collector that refuses). `bodies` keeps each request's
raw bytes, for a test that asserts something appears nowhere in what left the process."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.fakes.loopback import LoopbackServer

PROTOBUF = "application/x-protobuf"


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


@dataclass
class Span:
    name: str
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_id: str  # "" for a root
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    resource: dict[str, Any] = field(default_factory=lambda: dict[str, Any]())
    scope: str = ""
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=lambda: list[tuple[str, dict[str, Any]]]())


class FakeOtlp:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.headers: list[dict[str, str]] = []
        self.bodies: list[bytes] = []
        self.requests = 0
        self.hang = False
        self.status = 200
        self._lock = threading.Lock()
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self.server = LoopbackServer(app)

    def start(self) -> FakeOtlp:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()

    @property
    def endpoint(self) -> str:
        """What OTEL_EXPORTER_OTLP_ENDPOINT is set to (the exporter adds /v1/traces)."""
        return self.server.url

    def wait_for(self, count: int, name: str | None = None, timeout: float = 30.0) -> list[Span]:
        """Poll until `count` spans (named `name`, if given) arrived; all spans so far."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                spans = list(self.spans)
            if len([s for s in spans if name is None or s.name == name]) >= count:
                return spans
            assert time.monotonic() < deadline, f"only {[s.name for s in spans]} arrived"
            time.sleep(0.05)

    async def _traces(self, request: web.Request) -> web.Response:
        body = await request.read()
        with self._lock:
            self.requests += 1
            self.headers.append(dict(request.headers))
            self.bodies.append(body)
        if self.hang:
            await asyncio.sleep(3600)
        if self.status != 200:
            return web.Response(status=self.status, text="refused")
        assert request.content_type == PROTOBUF, request.content_type
        decoded = ExportTraceServiceRequest.FromString(body)
        spans: list[Span] = []
        for rs in decoded.resource_spans:
            resource = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    spans.append(Span(s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.kind,
                                      s.start_time_unix_nano, s.end_time_unix_nano,
                                      {kv.key: _value(kv.value) for kv in s.attributes}, s.status.code,
                                      s.status.message, resource, ss.scope.name,
                                      [(e.name, {kv.key: _value(kv.value) for kv in e.attributes}) for e in s.events]))
        with self._lock:
            self.spans.extend(spans)
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(), content_type=PROTOBUF)
