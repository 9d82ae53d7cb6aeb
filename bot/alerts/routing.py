"""Which agent investigates an alert group: the first profile (by name) with a route that matches it, and its
first such route. A route matches when one alert of the group carries every label the route names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bot.alerts.payloads import Notification
from bot.engine.spec import AgentProfile, AlertRoute


@dataclass(frozen=True, slots=True)
class Routed:
    agent: str
    route: AlertRoute
    index: int  # the route's place in the agent's `alerts:` list (shown by `yokebot alerts test`)


def label_sets(n: Notification) -> list[dict[str, str]]:
    """One label set per alert of the group, the group's common labels counting for each: a route (or a
    runbook's `match`) fits the group when it fits one of them."""
    return [{**n.common_labels, **a.labels} for a in n.alerts] or [dict(n.common_labels)]


def route_for(profiles: Mapping[str, AgentProfile], n: Notification) -> Routed | None:
    sets = label_sets(n)
    for name in sorted(profiles):
        for i, route in enumerate(profiles[name].alerts):
            if any(route.matches(labels) for labels in sets):
                return Routed(name, route, i)
    return None
