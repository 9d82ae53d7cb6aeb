"""Issue 37, findings 3 and 4: what an alert body may carry. Secrets in its labels and annotations reach nothing
built from it (the model, the thread, the audit) unredacted; only the stored raw body keeps them, as received.
A body that can never be stored (nested too deep, a label that is not a string) is a 400 with one sentence, never
a 503 that Alertmanager would resend forever."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.alerts import render
from bot.alerts.payloads import MAX_DEPTH, BadPayload, parse
from bot.engine.spec.alert_routes import AlertRoute
from bot.redact import MARK, SecretRedactor
from tests.alerts.harness import ROOT_CHANNEL, TOKEN, Served, hook, ops_agent, payload, processed, up
from tests.alerts.test_slack_alerts import AM, roots, settings_for
from tests.chat.slack_harness import answered
from tests.conftest import make_settings
from tests.fakes.discord_server import OPS_ALERTS, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.helpers import db_rows, eventually, free_port

SLACK_SHAPED = "xoxb-1234567890-abcdefghijklmnop"  # a Slack bot token's shape
BEARER_TOKEN = "eyZ9abcdef0123456789secretpart"
BEARER = f"Bearer {BEARER_TOKEN}"
# The whole texts built from a body, and every audit table a turn writes: none may hold a secret.
BUILT = ("turns", "messages", "llm_calls", "inbox", "alert_groups", "sessions")


def leaky() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Firing, joined and resolved bodies of one group whose labels and annotations carry secrets: a Slack
    token in a label the route's prompt quotes and in the group's labels and key, a bearer token in the summary,
    and this instance's own webhook token (a configured secret, no known shape) as the joining alert's instance."""
    bodies = []
    for name in ("alertmanager_firing", "alertmanager_joined", "alertmanager_resolved"):
        body = payload(name)
        body["groupKey"] = f'{{}}:{{service="{SLACK_SHAPED}"}}'
        body["groupLabels"] = {"service": SLACK_SHAPED}
        body["commonLabels"]["service"] = SLACK_SHAPED
        body["commonAnnotations"]["summary"] = f"the api refuses {BEARER}"
        for alert in body["alerts"]:
            alert["labels"]["service"] = SLACK_SHAPED
            alert["annotations"]["summary"] = f"the api refuses {BEARER}"
        bodies.append(body)
    bodies[1]["alerts"][-1]["labels"]["instance"] = TOKEN
    bodies[2]["alerts"][-1]["labels"]["instance"] = TOKEN
    return bodies[0], bodies[1], bodies[2]


def secrets_in(text: str) -> list[str]:
    return [s for s in (SLACK_SHAPED, BEARER_TOKEN, TOKEN) if s in text]


async def test_secrets_in_an_alerts_labels_reach_no_model_thread_or_audit_row_only_the_stored_body(
    db_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_slack: FakeSlack
):
    agents = tmp_path / "agents"
    ops_agent(agents)  # its prompt quotes {labels.service}
    settings = settings_for(db_url, fake_llm, agents, fake_slack)
    fake_llm.reply("Looked at it: a bad deploy.")
    firing, joined, resolved = leaky()
    served = Served(settings)
    try:
        await up(settings)
        assert (await hook(settings, AM, firing))[0] == 200
        await eventually(lambda: roots(fake_slack), what="the root message")
        await answered(fake_slack, roots(fake_slack)[0].result["ts"])
        assert (await hook(settings, AM, joined))[0] == 200
        await processed(db_url, 2)
        assert (await hook(settings, AM, resolved))[0] == 200
        await processed(db_url, 3)
    finally:
        await served.stop()

    root = roots(fake_slack)[0]
    assert "Summary: `the api refuses Bearer [REDACTED]`" in root["text"]
    thread = [p["text"] for p in fake_slack.posts(ROOT_CHANNEL, thread_ts=root.result["ts"])]
    assert thread[1] == f"➕ 1 new alert joined this group: `HighErrorRate` on `{MARK}`"
    asked = fake_llm.requests[0]["messages"][-1]["content"]
    assert f'Start with the "{MARK}" service.' in asked and "Bearer [REDACTED]" in asked
    shown = [json.dumps(c.params, ensure_ascii=False) for c in fake_slack.calls]
    assert [secrets_in(s) for s in shown if secrets_in(s)] == []  # posts, edits, thread notes
    assert secrets_in(json.dumps(fake_llm.requests, ensure_ascii=False)) == []
    for table in BUILT:
        rows = await db_rows(db_url, f"SELECT * FROM {table}")
        assert rows, table
        assert [secrets_in(str(r)) for r in rows if secrets_in(str(r))] == [], table
    stored = await db_rows(db_url, "SELECT body, note FROM alert_notifications ORDER BY id")
    assert [json.loads(r.body) for r in stored] == [firing, joined, resolved]  # the record of what was received
    assert all(secrets_in(r.body) for r in stored) and not any(secrets_in(r.note or "") for r in stored)


async def test_a_secret_alert_name_does_not_name_the_discord_thread(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_discord: FakeDiscord
):
    """Nor does a bidi override in it, which made the thread list read "Alert: Leak exe.png" backwards."""
    agents = tmp_path / "agents"
    ops_agent(agents, post_to=f"discord:{OPS_ALERTS}")
    settings = make_settings(sqlite_url, fake_llm, agents, default_agent="ops", http_port=free_port(),
                             http_host="127.0.0.1", scheduler_enabled=False, webhook_token=TOKEN,
                             discord_bot_token="discord-alerts-token-0123456789",
                             discord_api_url=fake_discord.api_url, discord_gateway_url=fake_discord.gateway_url,
                             discord_guild_ready_timeout=0.05)
    fake_llm.reply("Looked at it.")
    body = payload("alertmanager_firing")
    body["commonLabels"]["alertname"] = body["alerts"][0]["labels"]["alertname"] = f"Leak {SLACK_SHAPED} \u202egnp.exe"
    served = Served(settings)
    try:
        await up(settings)
        assert (await hook(settings, AM, body))[0] == 200
        [root] = await eventually(lambda: fake_discord.posted_in(OPS_ALERTS), what="the root message")
        await eventually(lambda: fake_discord.posted_in(root.id), what="the investigation in the thread")
    finally:
        await served.stop()
    assert fake_discord.threads[root.id]["name"] == f"Alert: Leak {MARK} \ufffdgnp.exe"
    assert secrets_in(root.content) == [] and f"`Leak {MARK} \ufffdgnp.exe`" in root.content


def test_a_secret_named_by_its_label_is_redacted_where_the_prompt_quotes_the_value_alone():
    body = payload("alertmanager_firing")
    body["alerts"][0]["labels"]["db_password"] = "hunter2 correct-horse battery staple"
    body["alerts"][0]["labels"]["tokens"] = "12"  # a small number after a secret-ish name is not a secret
    body["externalURL"] = "https://admin:pa55word@alertmanager.example:9093"
    n = parse("alertmanager", json.dumps(body).encode(), SecretRedactor(["correct-horse"]))
    route = AlertRoute(match=(), post_to="slack:#x",
                       prompt="Check {labels.db_password} and {labels.tokens}.")
    asked = render.prompt(n, route)
    assert f'Check "{MARK}" and "12".' in asked  # quoted without its name, the value is still a secret
    assert "hunter2" not in asked and "correct-horse" not in asked and "battery" not in asked
    assert n.alerts[0].labels["db_password"] == MARK and n.alerts[0].labels["severity"] == "critical"
    assert n.external_url == f"https://admin:{MARK}@alertmanager.example:9093"


def test_a_secret_at_the_value_limit_is_redacted_before_the_value_is_cut():
    from bot.alerts.payloads import MAX_VALUE_CHARS

    body = payload("alertmanager_firing")
    body["alerts"][0]["annotations"]["description"] = "x" * (MAX_VALUE_CHARS - 10) + " " + BEARER
    n = parse("alertmanager", json.dumps(body).encode(), SecretRedactor())
    described = n.alerts[0].annotations["description"]
    assert len(described) <= MAX_VALUE_CHARS and "eyZ9" not in described and "Bearer eyZ" not in described


# --- finding 4: bodies that can never be stored --------------------------------------------------------------
def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


async def test_poison_bodies_are_a_400_with_one_sentence_never_a_503(
    sqlite_url: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_slack: FakeSlack
):
    agents = tmp_path / "agents"
    ops_agent(agents)
    settings = settings_for(sqlite_url, fake_llm, agents, fake_slack)
    deep_labels = payload("alertmanager_firing")
    inner = '"x"'
    for _ in range(50_000):
        inner = '{"a": ' + inner + "}"
    text = json.dumps(deep_labels)
    deep_labels_raw = text.replace('"labels": {', f'"labels": {{"deep": {inner}, ', 1).encode()
    object_label = payload("alertmanager_firing")
    object_label["alerts"][0]["labels"]["service"] = {"name": "api"}
    number_annotation = payload("alertmanager_firing")
    number_annotation["commonAnnotations"]["value"] = 91.2
    in_string = payload("alertmanager_firing")  # brackets inside strings are text, not nesting
    in_string["alerts"][0]["annotations"]["description"] = "[" * 5000 + "{" * 5000
    fake_llm.reply("Looked at it.")
    served = Served(settings)
    try:
        await up(settings)
        deep = await hook(settings, AM, None, raw=b'{"version": "4", "alerts": ' + nested(200_000) + b"}")
        deep_object = await hook(settings, AM, None, raw=b'{"a":' * 100_000 + b"1" + b"}" * 100_000)
        labels = await hook(settings, AM, None, raw=deep_labels_raw)
        obj = await hook(settings, AM, object_label)
        number = await hook(settings, AM, number_annotation)
        brackets = await hook(settings, AM, in_string)
        too_deep = f"The body is nested deeper than {MAX_DEPTH} levels; an alert body is not."
        assert deep == (400, {"error": too_deep})
        assert deep_object == (400, {"error": too_deep})
        assert labels == (400, {"error": too_deep})
        assert obj == (400, {"error": "`alerts[0].labels.service` must be a string."})
        assert number == (400, {"error": "`commonAnnotations.value` must be a string."})
        assert brackets[0] == 200
        await processed(sqlite_url, 1)
    finally:
        await served.stop()
    assert len(await db_rows(sqlite_url, "SELECT id FROM alert_notifications")) == 1  # the good one only


@pytest.mark.parametrize(("raw", "said"), [
    (nested(MAX_DEPTH + 1), "nested deeper"),
    (b'{"version": "4", "groupKey": "k", "status": "firing", "alerts": [{"status": "firing", '
     b'"labels": {"a": ["b"]}}]}', "`alerts[0].labels.a` must be a string."),
    (b'{"version": "4", "groupKey": "k", "status": "firing", "alerts": [{"status": "firing", '
     b'"labels": {"a": null}}]}', "`alerts[0].labels.a` must be a string."),
    (b'{"version": "4", "groupKey": "k", "status": "firing", "alerts": [{"status": "firing"}], '
     b'"groupLabels": {"a": true}}', "`groupLabels.a` must be a string."),
])
def test_a_body_that_is_too_deep_or_has_a_label_that_is_not_a_string_is_bad(raw: bytes, said: str):
    with pytest.raises(BadPayload) as info:
        parse("alertmanager", raw, SecretRedactor())
    assert said in str(info.value)


def test_a_body_exactly_at_the_depth_limit_parses_as_json():
    from bot.alerts.payloads import decode

    body = b'{"a": ' + nested(MAX_DEPTH - 1) + b"}"
    assert decode(body)["a"] is not None


@pytest.mark.postgres
async def test_only_a_database_that_is_away_is_a_503_and_the_resend_is_stored(
    pg_database: str, fake_llm: FakeOpenAI, tmp_path: Path, fake_slack: FakeSlack
):
    from tests.fakes.tcp_proxy import TcpProxy

    proxy = TcpProxy("127.0.0.1", 5432).start()  # the shared server stays up; its road here is cut
    host_part, dbname = pg_database.rsplit("/", 1)
    agents = tmp_path / "agents"
    ops_agent(agents)
    settings = settings_for(host_part.rsplit(":", 1)[0] + f":{proxy.port}/{dbname}", fake_llm, agents, fake_slack)
    fake_llm.reply("Looked at it.")
    served = Served(settings)
    try:
        await up(settings)
        assert (await hook(settings, AM, payload("alertmanager_firing")))[0] == 200  # started through and through
        await eventually(lambda: roots(fake_slack), what="the root message")
        await answered(fake_slack, roots(fake_slack)[0].result["ts"])
        proxy.pause()
        away = await hook(settings, AM, payload("alertmanager_firing"))
        refused = await hook(settings, AM, None, raw=nested(200_000))  # a poison body is a 400 all the same
        proxy.resume()
        resent = await hook(settings, AM, payload("alertmanager_firing"))  # as Alertmanager does
        await processed(pg_database, 2)
    finally:
        await served.stop()
        proxy.stop()
    assert away == (503, {"error": "The alert could not be stored right now; send it again."})
    assert refused[0] == 400 and resent[0] == 200


def test_escape_sequences_and_controls_in_labels_never_reach_the_prompt_the_root_or_the_thread():
    """A label or annotation is text from outside like a tool result: the same model-input gate (for_model)
    removes escape sequences and C0/C1 controls before anything is built from it."""
    body = payload("alertmanager_firing")
    body["alerts"][0]["labels"]["instance"] = "api-1\x1b]0;pwned\x07\x1b[2J\x00:8080"
    body["alerts"][0]["annotations"]["summary"] = "5xx\x9b31m ratio\x07 high"
    n = parse("alertmanager", json.dumps(body).encode())
    alert = n.alerts[0]
    assert alert.labels["instance"] == "api-1:8080"
    assert alert.annotations["summary"] == "5xx ratio high"
    texts = [render.root_text(n), *(v for a in n.alerts for v in (*a.labels.values(), *a.annotations.values()))]
    assert not any(ch in t for t in texts for ch in ("\x1b", "\x07", "\x00", "\x9b"))
