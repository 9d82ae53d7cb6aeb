"""The `alerts:` section of AGENT.md, routing a group to an agent, and the group table's one-row-per-group rule
with two instances at once (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bot.alerts.payloads import BadPayload, parse
from bot.alerts.routing import route_for
from bot.alerts.store import AlertStore
from bot.app import App
from bot.chat.platforms import names
from bot.engine.errors import ProfileError
from bot.engine.spec.profiles import ProfileLoader
from bot.tools import builtin_tools
from tests.alerts.harness import PAYLOADS, payload
from tests.helpers import write_agent


def load(agents: Path, name: str, front: str):
    write_agent(agents, name, front)
    return ProfileLoader(agents, builtin_tools(), platforms=names()).load(name)  # as bot/app.py loads them


def test_routes_are_parsed_into_frozen_routes_and_match_by_label(tmp_path: Path):
    db = load(tmp_path, "db", 'alerts:\n  - {match: {team: db}, post_to: "discord:42", cooldown: 30m}')
    api = load(tmp_path, "api", 'alerts:\n  - match: {service: "~ap[i]|web", severity: critical}\n'
                                '    post_to: "slack:#ops-alerts"\n    prompt: "Look at {labels.service}."')
    assert api.alerts[0].cooldown_seconds == 3600 and db.alerts[0].cooldown_seconds == 1800
    n = parse("alertmanager", json.dumps(payload("alertmanager_firing")).encode())
    found = route_for({"db": db, "api": api}, n)
    assert found is not None and (found.agent, found.route.post_to) == ("api", "slack:#ops-alerts")
    other = payload("alertmanager_firing")
    other["alerts"][0]["labels"]["service"] = "apix"  # the expression is anchored
    other["commonLabels"].pop("service")
    assert route_for({"db": db, "api": api}, parse("alertmanager", json.dumps(other).encode())) is None


@pytest.mark.parametrize(("front", "said"), [
    ('alerts:\n  - {match: {sev: "~(["}, post_to: "slack:#x"}', "alerts.0.match: Value error, the value of 'sev' "
                                                                "is not an RE2 expression"),
    ('alerts:\n  - {match: {}, post_to: "slack:#x"}', "needs at least one label"),
    ('alerts:\n  - {match: {a: b}, post_to: "zulip:#x"}', "names an unknown platform"),
    ('alerts:\n  - {match: {a: b}, post_to: "slack:#x", cooldown: soon}', "is not an interval"),
    ('alerts:\n  - {match: {a: b}, post_to: "slack:#x", when: now}', "alerts.0.when: unknown key"),
])
def test_a_bad_route_fails_the_profile_with_one_sentence_and_its_line(tmp_path: Path, front: str, said: str):
    with pytest.raises(ProfileError) as info:
        load(tmp_path, "ops", "description: x\n" + front)
    assert said in str(info.value) and "AGENT.md:4: " in str(info.value)  # the route's line


@pytest.mark.parametrize(("name", "source"), [("alertmanager_firing", "grafana"), ("grafana_firing", "alertmanager")])
def test_a_body_for_the_other_sender_is_refused(name: str, source: str):
    with pytest.raises(BadPayload):
        parse(source, (PAYLOADS / f"{name}.json").read_bytes())  # type: ignore[arg-type]


async def test_two_instances_receiving_one_group_at_once_make_one_row_and_one_root_claim(any_bot: App):
    a, b = AlertStore(any_bot.engine, "instance-a"), AlertStore(any_bot.engine, "instance-b")
    key = '{}:{alertname="HighErrorRate"}'
    results = await asyncio.gather(*(s.group_for("alertmanager", key, "ops", "slack:#x", "t", 3600)
                                     for s in (a, b, a, b)))
    assert sum(made for _, made in results) == 1 and len({g.id for g, _ in results}) == 1
    group = results[0][0]
    maker = a if next(g for g, made in results if made).root_owner == "instance-a" else b
    other = b if maker is a else a
    assert await other.claim_root(group) is False  # the maker's claim is live
    assert await maker.claim_root(group) is True


def test_a_group_resolves_at_its_alerts_latest_end_never_in_the_future_and_now_when_none_says():
    from datetime import UTC, datetime

    from bot.alerts.incidents import ended

    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    body = payload("alertmanager_resolved")
    body["alerts"][1]["endsAt"] = "2026-12-01T22:35:10.123456789+01:00"  # the later, another zone, ns
    n = parse("alertmanager", json.dumps(body).encode())
    assert ended(n, now) == datetime(2026, 12, 1, 21, 35, 10, 123456, tzinfo=UTC)
    for a in body["alerts"]:
        a["endsAt"] = "0001-01-01T00:00:00Z"  # Alertmanager's "not ended"
    assert ended(parse("alertmanager", json.dumps(body).encode()), now) == now
    body["alerts"][0]["endsAt"] = "2027-01-01T00:00:00Z"  # a sender's clock ahead of ours
    assert ended(parse("alertmanager", json.dumps(body).encode()), now) == now
