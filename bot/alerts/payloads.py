"""Webhook bodies -> `Notification`: Alertmanager's (`version: "4"`) and Grafana's unified-alerting contact point
(the same shape, `version: "1"`, plus Grafana's own fields). Pure functions; a body that is not one of them is
`BadPayload` with one sentence for the sender.

Every label and annotation value is untrusted text (whoever can write a rule or push to Alertmanager writes
it): this module keeps it as data; bot/alerts/render.py decides how it is shown."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

Source = Literal["alertmanager", "grafana"]
Status = Literal["firing", "resolved"]
MAX_BODY_BYTES = 1024 * 1024
MAX_ALERTS = 1000  # alerts kept per notification (Alertmanager's own max_alerts is usually far lower)
MAX_VALUE_CHARS = 4000


class BadPayload(ValueError):
    """The body is not an Alertmanager or Grafana notification; `str()` is the sentence for the sender."""


@dataclass(frozen=True, slots=True)
class Alert:
    fingerprint: str
    status: Status
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    starts_at: str = ""
    ends_at: str = ""
    generator_url: str = ""

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def instance(self) -> str:
        for key in ("instance", "pod", "host", "node", "job"):
            if self.labels.get(key):
                return self.labels[key]
        return ""


@dataclass(frozen=True, slots=True)
class Notification:
    source: Source
    group_key: str  # one thread per (source, group_key)
    status: Status
    receiver: str
    alerts: tuple[Alert, ...]
    group_labels: Mapping[str, str] = field(default_factory=lambda: dict[str, str]())
    common_labels: Mapping[str, str] = field(default_factory=lambda: dict[str, str]())
    common_annotations: Mapping[str, str] = field(default_factory=lambda: dict[str, str]())
    external_url: str = ""
    truncated: int = 0

    @property
    def firing(self) -> tuple[Alert, ...]:
        return tuple(a for a in self.alerts if a.status == "firing")


def _text(value: Any) -> str:
    return (value if isinstance(value, str) else "" if value is None else str(value))[:MAX_VALUE_CHARS]


def _strings(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadPayload(f"`{what}` must be an object of names to values.")
    return {str(k)[:200]: _text(v) for k, v in cast(dict[Any, Any], value).items()}


def _status(value: Any, what: str) -> Status:
    if value not in ("firing", "resolved"):
        raise BadPayload(f"`{what}` must be \"firing\" or \"resolved\".")
    return cast(Status, value)


def _fingerprint(labels: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(sorted(labels.items())).encode()).hexdigest()[:16]


def _alert(raw: Any, i: int) -> Alert:
    if not isinstance(raw, dict):
        raise BadPayload(f"`alerts[{i}]` must be an object.")
    a = cast(dict[str, Any], raw)
    labels = _strings(a.get("labels"), f"alerts[{i}].labels")
    return Alert(fingerprint=_text(a.get("fingerprint"))[:64] or _fingerprint(labels),
                 status=_status(a.get("status"), f"alerts[{i}].status"), labels=labels,
                 annotations=_strings(a.get("annotations"), f"alerts[{i}].annotations"),
                 starts_at=_text(a.get("startsAt"))[:40], ends_at=_text(a.get("endsAt"))[:40],
                 generator_url=_text(a.get("generatorURL")))


def decode(body: bytes) -> dict[str, Any]:
    try:
        data: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadPayload("The body is not JSON.") from None
    if not isinstance(data, dict):
        raise BadPayload("The body must be a JSON object.")
    return cast(dict[str, Any], data)


def parse(source: Source, body: bytes) -> Notification:
    data = decode(body)
    if source == "alertmanager" and data.get("version") != "4":
        raise BadPayload("This is not an Alertmanager webhook body (it needs \"version\": \"4\").")
    if source == "grafana" and "orgId" not in data and "state" not in data and data.get("version") != "1":
        raise BadPayload("This is not a Grafana webhook body (no orgId, state or version \"1\").")
    raw_alerts = data.get("alerts")
    if not isinstance(raw_alerts, list) or not raw_alerts:
        raise BadPayload("The body has no `alerts` list.")
    alerts = tuple(_alert(a, i) for i, a in enumerate(cast(list[Any], raw_alerts)[:MAX_ALERTS]))
    group_labels = _strings(data.get("groupLabels"), "groupLabels")
    receiver = _text(data.get("receiver"))[:200]
    return Notification(source=source, group_key=_group_key(source, data, receiver, group_labels),
                        status=_status(data.get("status"), "status"), receiver=receiver, alerts=alerts,
                        group_labels=group_labels, common_labels=_strings(data.get("commonLabels"), "commonLabels"),
                        common_annotations=_strings(data.get("commonAnnotations"), "commonAnnotations"),
                        external_url=_text(data.get("externalURL")),
                        truncated=int(data.get("truncatedAlerts") or 0) if str(data.get("truncatedAlerts") or "0")
                        .isdigit() else 0)


def _group_key(source: Source, data: dict[str, Any], receiver: str, group_labels: Mapping[str, str]) -> str:
    """Alertmanager: its `groupKey` (the route and the group's labels). Grafana: the organisation, the contact
    point and the group labels (its groupKey spells the same thing differently across versions)."""
    if source == "alertmanager":
        key = data.get("groupKey")
        if not isinstance(key, str) or not key:
            raise BadPayload("The body has no `groupKey`.")
        return key[:1000]
    labels = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(group_labels.items()))
    return f"{_text(data.get('orgId'))}/{receiver}:{{{labels}}}"[:1000]
