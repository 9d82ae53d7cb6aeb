"""Webhook bodies -> `Notification`: Alertmanager's (`version: "4"`) and Grafana's unified-alerting contact point
(the same shape, `version: "1"`, plus Grafana's own fields). Pure functions; a body that is not one of them is
`BadPayload` with one sentence for the sender: a body that is not UTF-8 JSON, nested deeper than MAX_DEPTH (checked
before the JSON is parsed: Python's parser recurses, and a body 200,000 deep made it raise RecursionError), or whose
labels and annotations are not flat maps of strings. Such a body can never be stored, so it is never retried.

Every label and annotation value is untrusted text (whoever can write a rule or push to Alertmanager writes it):
this module keeps it as data; bot/alerts/render.py decides how it is shown. It may also hold a secret (a token
pasted into a label): every text of a `Notification` has passed the redactor, so nothing built from one (the
root and notes, the investigation's prompt, the group's row, log lines) can show it; the stored raw body is the
one record of what was received."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Literal, cast

from bot.redact import LOOKAHEAD, MARK, PATTERNS_ONLY, cut, for_model, printable

Source = Literal["alertmanager", "grafana"]
Status = Literal["firing", "resolved"]
MAX_BODY_BYTES = 1024 * 1024
MAX_ALERTS = 1000  # alerts kept per notification (Alertmanager's own max_alerts is usually far lower)
MAX_VALUE_CHARS = 4000
MAX_DEPTH = 64  # an Alertmanager or Grafana body nests 4 deep (body, alerts, an alert, its labels)
Redact = Callable[[str], str]


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


def _text(value: Any, redact: Redact, limit: int = MAX_VALUE_CHARS) -> str:
    """A value as redacted text of at most `limit` characters: without escape sequences and control characters
    (`for_model`, the gate tool results pass: the text reaches the model, the thread and the audit), then
    redacted before it is cut (bot/redact.py `cut`), so a secret at the limit is never shown in part."""
    text = value if isinstance(value, str) else "" if value is None else str(value)
    return cut(for_model(text[: limit + LOOKAHEAD]), limit, redact)[0]


def _named(name: str, value: str, redact: Redact) -> str:
    """A label's value, redacted, also where its name says what it is (`db_password: hunter2`): the route's prompt
    quotes a value without its name, where the redactor's `name: value` rule cannot see it. Such a value is
    replaced whole (the rule stops at a space: `correct horse battery` would keep `horse battery`)."""
    said = f"{name}: {value}"
    return value if redact(said) == said else MARK


def _strings(value: Any, what: str, redact: Redact) -> dict[str, str]:
    """Labels and annotations: a flat object of names to strings (Alertmanager's and Grafana's are)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadPayload(f"`{what}` must be an object of names to values.")
    out: dict[str, str] = {}
    for key, raw in cast(dict[str, Any], value).items():
        name = _text(key, redact, 200)
        if not isinstance(raw, str):
            shown = printable(name, one_line=True).replace("`", "'")[:80]
            raise BadPayload(f"`{what}.{shown}` must be a string.")
        out[name] = _named(name, _text(raw, redact), redact)
    return out


def _status(value: Any, what: str) -> Status:
    if value == "firing" or value == "resolved":
        return value
    raise BadPayload(f"`{what}` must be \"firing\" or \"resolved\".")


def _fingerprint(labels: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(sorted(labels.items())).encode()).hexdigest()[:16]


def _alert(raw: Any, i: int, redact: Redact) -> Alert:
    if not isinstance(raw, dict):
        raise BadPayload(f"`alerts[{i}]` must be an object.")
    a = cast(dict[str, Any], raw)
    labels = _strings(a.get("labels"), f"alerts[{i}].labels", redact)
    return Alert(fingerprint=_text(a.get("fingerprint"), redact, 64) or _fingerprint(labels),
                 status=_status(a.get("status"), f"alerts[{i}].status"), labels=labels,
                 annotations=_strings(a.get("annotations"), f"alerts[{i}].annotations", redact),
                 starts_at=_text(a.get("startsAt"), redact, 40), ends_at=_text(a.get("endsAt"), redact, 40),
                 generator_url=_text(a.get("generatorURL"), redact))


# --- the nesting, measured before the JSON is parsed, in time linear in the body and without recursion ----------
_STRUCTURE = bytes(c for c in range(256) if c not in b'"[]{}')  # deleted: all but quotes and brackets
_PARENS = bytes.maketrans(b"[{]}", b"(())")
_STRING = re.compile(rb'"[^"]*"')
_RUN = re.compile(rb"\(+|\)+")
_ROUNDS = 4


def depth(body: bytes) -> int:
    """How deep the JSON in `body` (UTF-8) nests, counting only the brackets outside strings: escapes are dropped
    first (so every quote left opens or closes a string), then everything but quotes and brackets, then the
    strings. A few rounds take away the innermost pairs (an ordinary body is gone after them), then the runs of
    what is left are summed. Bytes-level operations only: 1 MB of brackets takes milliseconds."""
    s = body.replace(b"\\\\", b"").replace(b'\\"', b"").translate(_PARENS, _STRUCTURE).replace(b'""', b"")
    if b'"' in s:
        s = _STRING.sub(b"", s)
    removed = 0
    while removed < _ROUNDS and b"(" * (MAX_DEPTH + 1 - removed) not in s:
        inner = s.replace(b"()", b"")
        if len(inner) == len(s):
            break
        s, removed = inner, removed + 1
    if b"(" * (MAX_DEPTH + 1 - removed) in s:
        return MAX_DEPTH + 1
    runs = (len(run) if run[0] == ord("(") else -len(run) for run in _RUN.findall(s))
    return removed + max(accumulate(runs, initial=0))


def decode(body: bytes) -> dict[str, Any]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadPayload("The body is not UTF-8 JSON.") from None
    if depth(body) > MAX_DEPTH:
        raise BadPayload(f"The body is nested deeper than {MAX_DEPTH} levels; an alert body is not.")
    try:
        data: Any = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: only if `depth` ever undercounted (it is the guard)
        raise BadPayload("The body is not JSON.") from None
    if not isinstance(data, dict):
        raise BadPayload("The body must be a JSON object.")
    return cast(dict[str, Any], data)


def parse(source: Source, body: bytes, redact: Redact = PATTERNS_ONLY) -> Notification:
    """The notification in `body`, every text of it redacted by `redact` (the app's: its configured secrets too)."""
    data = decode(body)
    if source == "alertmanager" and data.get("version") != "4":
        raise BadPayload("This is not an Alertmanager webhook body (it needs \"version\": \"4\").")
    if source == "grafana" and "orgId" not in data and "state" not in data and data.get("version") != "1":
        raise BadPayload("This is not a Grafana webhook body (no orgId, state or version \"1\").")
    raw_alerts = data.get("alerts")
    if not isinstance(raw_alerts, list) or not raw_alerts:
        raise BadPayload("The body has no `alerts` list.")
    alerts = tuple(_alert(a, i, redact) for i, a in enumerate(cast(list[Any], raw_alerts)[:MAX_ALERTS]))
    group_labels = _strings(data.get("groupLabels"), "groupLabels", redact)
    receiver = _text(data.get("receiver"), redact, 200)
    return Notification(source=source, group_key=_group_key(source, data, receiver, group_labels, redact),
                        status=_status(data.get("status"), "status"), receiver=receiver, alerts=alerts,
                        group_labels=group_labels,
                        common_labels=_strings(data.get("commonLabels"), "commonLabels", redact),
                        common_annotations=_strings(data.get("commonAnnotations"), "commonAnnotations", redact),
                        external_url=_text(data.get("externalURL"), redact),
                        truncated=int(data.get("truncatedAlerts") or 0) if str(data.get("truncatedAlerts") or "0")
                        .isdigit() else 0)


def _group_key(source: Source, data: dict[str, Any], receiver: str, group_labels: Mapping[str, str],
               redact: Redact) -> str:
    """Alertmanager: its `groupKey` (the route and the group's labels). Grafana: the organisation, the contact
    point and the group labels (its groupKey spells the same thing differently across versions)."""
    if source == "alertmanager":
        key = data.get("groupKey")
        if not isinstance(key, str) or not key:
            raise BadPayload("The body has no `groupKey`.")
        return _text(key, redact, 1000)
    labels = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(group_labels.items()))
    return f"{_text(data.get('orgId'), redact)}/{receiver}:{{{labels}}}"[:1000]
