"""prometheus_query and prometheus_alerts: PromQL and the firing alerts of the Prometheus-compatible HTTP API
the agent's settings name (`prometheus_query: {url: "http://prometheus:9090"}`). The model reads a summary
(series count; per series its labels and last/min/max/avg; the top series when there are many); the raw
response goes to the audit row only (ToolOutput.detail). Header values come from `${VAR}` only."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

from pydantic import Field, field_validator

from bot.engine.errors import ToolFailed
from bot.engine.run import ToolContext, ToolOutput, require, tool
from bot.engine.spec import ENV_REF_RE, ToolSettings, parse_every

MAX_LABEL_CHARS = 200


class PrometheusSettings(ToolSettings):
    url: str
    headers: dict[str, str] = Field(default_factory=lambda: cast(dict[str, str], {}))
    max_series: int = Field(default=20, ge=1, le=500)  # series (or alerts) shown to the model
    max_response_bytes: int = Field(default=8_000_000, ge=1000, le=200_000_000)
    max_range: str = "7d"  # the longest `range` a query may ask for
    request_timeout: float = Field(default=20.0, gt=0, le=600)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")) or "@" in value.split("/", 3)[2]:
            raise ValueError(f"{value!r} is not an http(s) URL without credentials (put them in headers: ${{VAR}})")
        return value.rstrip("/")

    @field_validator("headers")
    @classmethod
    def _headers_from_env(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not ENV_REF_RE.search(text):
                raise ValueError(f"header {name!r} must take its value from the environment, like "
                                 "\"Bearer ${PROMETHEUS_TOKEN}\" (no literal secrets in AGENT.md)")
        return value

    @field_validator("max_range")
    @classmethod
    def _range(cls, value: str) -> str:
        parse_every(value)
        return value


def resolve_headers(headers: Mapping[str, str], environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The headers with `${VAR}` filled in, and the values used (to keep them out of every output)."""
    used: list[str] = []

    def value(match: Any) -> str:
        var = match.group(1)
        if var not in environ:
            raise ToolFailed(f"the Prometheus settings need the environment variable {var}, which is not set")
        used.append(environ[var])
        return environ[var]

    return {k: ENV_REF_RE.sub(value, v) for k, v in headers.items()}, [u for u in used if u]


async def fetch(settings: PrometheusSettings, path: str, params: dict[str, str],
                environ: Mapping[str, str] = os.environ) -> tuple[int, bytes]:
    """(HTTP status, body) of one GET against the API; the body is capped at max_response_bytes."""
    import aiohttp  # here: `chat` and `ask` load no serving library until a tool needs one
    headers, _ = resolve_headers(settings.headers, environ)
    timeout = aiohttp.ClientTimeout(total=settings.request_timeout)
    where = f"{settings.url}{path}"
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http, \
                http.get(where, params=params, headers=headers, allow_redirects=False) as resp:
            body = await resp.content.read(settings.max_response_bytes + 1)
            status = resp.status
    except TimeoutError:
        raise ToolFailed(f"Prometheus at {settings.url} did not answer within {settings.request_timeout:g} s") from None
    except aiohttp.ClientError as exc:
        raise ToolFailed(f"cannot reach Prometheus at {settings.url} ({type(exc).__name__}: {exc})") from None
    if len(body) > settings.max_response_bytes:
        raise ToolFailed(f"Prometheus answered with more than {settings.max_response_bytes:,} bytes; narrow the "
                         "query (a label matcher, sum by (...), topk(), a shorter range or a longer step)")
    return status, body


def _decode(status: int, body: bytes, url: str) -> dict[str, Any]:
    import json

    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ToolFailed(f"{url} answered HTTP {status} without a Prometheus API response; check the url setting")
    data = cast(dict[str, Any], data)
    if data.get("status") != "success":
        kind = data.get("errorType") or f"HTTP {status}"
        raise ToolFailed(f"Prometheus refused the request ({kind}): {data.get('error') or 'no reason given'}")
    return data


# --- summaries ------------------------------------------------------------------------------------------
def _num(text: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def fmt(value: float) -> str:
    return "NaN" if math.isnan(value) else f"{value:.6g}"


def labels(metric: Mapping[str, str]) -> str:
    name = metric.get("__name__", "")
    rest = ", ".join(f'{k}="{_short(v)}"' for k, v in sorted(metric.items()) if k != "__name__")
    return f"{name}{{{rest}}}" if rest or not name else name


def _short(text: str) -> str:
    return text if len(text) <= MAX_LABEL_CHARS else text[:MAX_LABEL_CHARS] + "…"


def _rank(value: float) -> float:
    return -math.inf if math.isnan(value) else value


def _series_lines(result: list[dict[str, Any]], kind: str, cap: int) -> list[str]:
    rows: list[tuple[float, str]] = []
    for series in result:
        metric = cast(dict[str, str], series.get("metric") or {})
        if kind == "matrix":
            values = [_num(v[1]) for v in cast(list[list[Any]], series.get("values") or [])]
            real = [v for v in values if not math.isnan(v)]
            last = values[-1] if values else math.nan
            stats = (f"last {fmt(last)}  min {fmt(min(real))}  max {fmt(max(real))}  "
                     f"avg {fmt(sum(real) / len(real))}" if real else f"last {fmt(last)}")
            rows.append((last, f"{labels(metric)}  {stats}  ({len(values)} points)"))
        else:
            value = _num((series.get("value") or [None, None])[1])
            rows.append((value, f"{labels(metric)}  {fmt(value)}"))
    rows.sort(key=lambda r: _rank(r[0]), reverse=True)
    lines = [f"{i}. {text}" for i, (_, text) in enumerate(rows[:cap], 1)]
    if len(rows) > cap:
        lines.append(f"[{len(rows) - cap} more series not shown; narrow the query with a label matcher, "
                     "sum by (...) or topk()]")
    return lines


def summarise(data: dict[str, Any], what: str, cap: int) -> str:
    payload = cast(dict[str, Any], data.get("data") or {})
    kind, result = payload.get("resultType"), payload.get("result")
    warnings = [f"Prometheus warned: {w}" for w in cast(list[str], data.get("warnings") or [])]
    if kind in ("scalar", "string"):
        value = cast(list[Any], result or [None, None])[1]
        return "\n".join([f"{what}: {kind} {value}", *warnings])
    series = cast(list[dict[str, Any]], result or [])
    if not series:
        return "\n".join([f"{what}: no series matched (the metric may not exist here, or the labels select "
                          "nothing; try the metric name alone, or count by (__name__)({__name__=~\"part.*\"}))",
                          *warnings])
    order = "sorted by last value, highest first" if kind == "matrix" else "highest first"
    head = f"{what}: {len(series)} series ({order})"
    return "\n".join([head, *_series_lines(series, str(kind), cap), *warnings])


def _ago(stamp: str, now: datetime) -> str:
    try:  # 2026-12-01T22:29:15.158313288Z: nanoseconds, which fromisoformat does not take
        then = datetime.fromisoformat(stamp[:19]).replace(tzinfo=UTC)
    except ValueError:
        return f"since {stamp}"
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"for {seconds // size}{unit}"
    return f"for {seconds}s"


SEVERITY = {"critical": 0, "page": 0, "error": 1, "warning": 2, "info": 3}


def summarise_alerts(data: dict[str, Any], url: str, include_pending: bool, cap: int, now: datetime) -> str:
    alerts = cast(list[dict[str, Any]], cast(dict[str, Any], data.get("data") or {}).get("alerts") or [])
    firing = [a for a in alerts if a.get("state") == "firing"]
    pending = [a for a in alerts if a.get("state") == "pending"]
    shown = firing + (pending if include_pending else [])
    head = f"Alerts at {url}: {len(firing)} firing, {len(pending)} pending"
    if not include_pending and pending:
        head += " (pending not shown; include_pending=true lists them)"
    if not shown:
        return head + "."
    shown.sort(key=lambda a: (a.get("state") != "firing", SEVERITY.get(str(a.get("labels", {}).get("severity")), 4),
                              str(a.get("activeAt", ""))))
    lines = [head + ":"]
    for i, alert in enumerate(shown[:cap], 1):
        lab = cast(dict[str, str], dict(alert.get("labels") or {}))
        name, severity = lab.pop("alertname", "?"), lab.pop("severity", None)
        notes = cast(dict[str, str], alert.get("annotations") or {})
        summary = notes.get("summary") or notes.get("description") or notes.get("message") or ""
        sev = f" [{severity}]" if severity else ""
        lines.append(f"{i}. {alert.get('state')}{sev} {name} {labels(lab)} {_ago(str(alert.get('activeAt')), now)}, "
                     f"value {fmt(_num(alert.get('value')))}" + (f": {_short(summary)}" if summary else ""))
    if len(shown) > cap:
        lines.append(f"[{len(shown) - cap} more alerts not shown]")
    return "\n".join(lines)


def _scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "[REDACTED]")
    return text


# --- the tools ------------------------------------------------------------------------------------------
@tool(
    "prometheus_query",
    "Run a PromQL query against this agent's Prometheus and get a summary: the number of series and, per "
    "series, its labels and value (for a `range` like 30m: last/min/max/avg over it). Use it for numbers over "
    "time: error and request rates, latency, saturation (CPU, memory, disk), whether a target is up "
    "(`up == 0`). Read logs for what an error says; query metrics for how often and since when. Prefer "
    "rate(x[5m]), sum by (label)(...) and topk(10, ...) so the answer stays small.",
    settings=PrometheusSettings,
    timeout=60.0,
)
async def prometheus_query(
    ctx: ToolContext[PrometheusSettings],
    query: str = Field(min_length=1, max_length=10_000),
    range: str | None = None,  # the and Prometheus's word, though it shadows the builtin
    step: str | None = None,
) -> str | ToolOutput:
    settings = ctx.settings
    now = time.time()
    if range is None:
        require(step is None, "step only applies to a range query; give range too (like 30m)")
        path, params, what = "/api/v1/query", {"query": query, "time": f"{now:.3f}"}, f"`{query}` now"
    else:
        seconds, step_seconds = _range_and_step(range, step, settings.max_range)
        path = "/api/v1/query_range"
        params = {"query": query, "start": f"{now - seconds:.3f}", "end": f"{now:.3f}", "step": str(step_seconds)}
        what = f"`{query}` over the last {range.strip()} (step {step_seconds}s)"
    _, secrets = resolve_headers(settings.headers, os.environ)
    status, body = await fetch(settings, path, params)
    raw = _scrub(body.decode("utf-8", "replace"), secrets)
    try:
        data = _decode(status, body, settings.url)
    except ToolFailed as exc:
        raise ToolFailed(_scrub(str(exc), secrets)) from None
    return ToolOutput(_scrub(summarise(data, what, settings.max_series), secrets), raw)


def _range_and_step(range_text: str, step: str | None, max_range: str) -> tuple[int, int]:
    try:
        seconds = parse_every(range_text)
        step_seconds = parse_every(step) if step else max(1, math.ceil(seconds / 120))
    except ValueError as exc:
        raise ToolFailed(str(exc)) from None
    require(seconds <= parse_every(max_range), f"range may be at most {max_range} for this agent")
    require(seconds / step_seconds <= 11_000, f"{range_text} at step {step_seconds}s is more than 11,000 points a "
            "series (Prometheus's limit); use a longer step")
    return seconds, step_seconds


@tool(
    "prometheus_alerts",
    "List the alerts firing now in this agent's Prometheus (its alerting rules): name, severity, labels, "
    "since when, value and summary, firing ones first and the most severe first. Use it FIRST when asked "
    "what is wrong or on fire; then look at the metrics and logs behind the alert.",
    settings=PrometheusSettings,
    timeout=60.0,
)
async def prometheus_alerts(
    ctx: ToolContext[PrometheusSettings], include_pending: bool = False
) -> str | ToolOutput:
    settings = ctx.settings
    _, secrets = resolve_headers(settings.headers, os.environ)
    status, body = await fetch(settings, "/api/v1/alerts", {})
    try:
        data = _decode(status, body, settings.url)
    except ToolFailed as exc:
        raise ToolFailed(_scrub(str(exc), secrets)) from None
    text = summarise_alerts(data, settings.url, include_pending, settings.max_series, datetime.now(UTC))
    return ToolOutput(_scrub(text, secrets), _scrub(body.decode("utf-8", "replace"), secrets))

