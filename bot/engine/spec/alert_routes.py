"""A profile's `alerts:` routes (docs/alerts.md): which alert groups this agent investigates, and where it posts.

    alerts:
      - match: {severity: critical, service: "~api|web"}   # label -> value; `~` starts an RE2 expression
        post_to: slack:#ops-alerts
        prompt: Check the {labels.service} error logs first.   # optional; {alertname}, {labels.X}, {annotations.X}
        cooldown: 1h                                         # optional: a group firing again within it keeps its thread

A value matches the whole label value (anchored, as Alertmanager's `=~`); a route matches a group when one of
its alerts carries every label it names. Pure data: parsing here, matching in `bot/alerts/routing.py`."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import re2
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from bot.engine.spec.cron import parse_every
from bot.engine.spec.targets import known_platform

DEFAULT_COOLDOWN = "1h"
LABEL_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class LabelMatch:
    label: str
    value: str  # the literal value, or the RE2 expression without its `~`
    regex: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        found = labels.get(self.label)
        if found is None:
            return False
        if self.regex:
            return re2.fullmatch(self.value, found) is not None
        return found == self.value


@dataclass(frozen=True, slots=True)
class AlertRoute:
    match: tuple[LabelMatch, ...]
    post_to: str  # platform:channel, like notify's
    prompt: str | None = None
    cooldown_seconds: int = 3600

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(m.matches(labels) for m in self.match)

    @property
    def platform(self) -> str:
        return self.post_to.partition(":")[0]

    @property
    def channel(self) -> str:
        return self.post_to.partition(":")[2]


def check_match(value: Any, why_one: str) -> dict[str, str]:
    """A `match:` mapping as written (label -> value; `~` starts an RE2 expression), checked: at least one
    label (`why_one` says why), label names, text values, expressions that compile. Alert routes and runbooks
    (bot/engine/spec/runbooks.py) both match labels this way."""
    if not isinstance(value, dict) or not value:
        raise ValueError(f"match: needs at least one label: value pair ({why_one})")
    out: dict[str, str] = {}
    for label, raw in cast(dict[Any, Any], value).items():
        if not isinstance(label, str) or not LABEL_RE.match(label):
            raise ValueError(f"{label!r} is not a label name (letters, digits and _)")
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            raise ValueError(f"the value of {label!r} must be text (quote it)")
        text = str(raw)
        if text.startswith("~"):
            try:
                re2.compile(text[1:])
            except re2.error as exc:
                why: Any = exc.args[0] if exc.args else exc
                why = why.decode(errors="replace") if isinstance(why, bytes) else str(why)
                raise ValueError(f"the value of {label!r} is not an RE2 expression ({why})") from None
        out[label] = text
    return out


def label_matches(match: Mapping[str, str]) -> tuple[LabelMatch, ...]:
    """A checked `match:` mapping as matchers (all of them must match)."""
    return tuple(LabelMatch(k, v[1:], True) if v.startswith("~") else LabelMatch(k, v) for k, v in match.items())


def matchers_text(match: Sequence[LabelMatch]) -> str:
    """Matchers as Alertmanager writes them: `alertname="DiskFull", service=~"api|web"`."""
    return ", ".join(f"{m.label}{'=~' if m.regex else '='}{json.dumps(m.value)}" for m in match)


class AlertRouteSpec(BaseModel):
    """One route as written in AGENT.md (validated, then frozen into an `AlertRoute`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: dict[str, str] = Field(default_factory=lambda: cast(dict[str, str], {}))
    post_to: str
    prompt: str | None = None
    cooldown: str = DEFAULT_COOLDOWN

    @field_validator("match", mode="before")
    @classmethod
    def _match(cls, value: Any) -> Any:
        return check_match(value, "a route matching everything would investigate every alert")

    @field_validator("post_to")
    @classmethod
    def _post_to(cls, value: str, info: ValidationInfo) -> str:
        _, sep, channel = value.partition(":")
        if not sep or not channel.strip() or " " in value:
            raise ValueError(f"{value!r} is not a channel target; write it as platform:channel, like slack:#ops")
        return known_platform(value, info)

    @field_validator("cooldown")
    @classmethod
    def _cooldown(cls, value: str) -> str:
        parse_every(value)
        return value

    def frozen(self) -> AlertRoute:
        return AlertRoute(label_matches(self.match), self.post_to, self.prompt, parse_every(self.cooldown))


def alert_routes(specs: list[AlertRouteSpec]) -> tuple[AlertRoute, ...]:
    return tuple(s.frozen() for s in specs)
