"""/metrics moves after a turn; /readyz follows the database and the adapters. Served over a real socket."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from bot.app import App, build_app
from bot.engine.service import TurnRequest
from bot.observability.http import add_observability_routes
from bot.runner import healthz
from tests.conftest import _pg_admin, make_settings
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import registry


async def serve(bot: App, token: str | None = None, backlog_every: float = 5.0,
                ready_fresh: float = 0.0) -> AsyncIterator[str]:
    """`ready_fresh` 0: these tests change the database or an adapter between two requests and read the change."""
    http = web.Application()
    http.router.add_get("/healthz", healthz)
    add_observability_routes(http, bot, token=token, backlog_every=backlog_every, ready_fresh=ready_fresh)
    runner = web.AppRunner(http)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
async def base(bot: App) -> AsyncIterator[str]:
    async for url in serve(bot):
        yield url


async def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as s, s.get(url, headers=headers) as r:
        return r.status, r.headers.get("Content-Type", ""), await r.text()


def samples(body: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(body) for s in fam.samples}


def value(body: str, name: str, **labels: str) -> float:
    return samples(body).get((name, frozenset(labels.items())), 0.0)


async def test_metrics_count_turns_model_calls_tokens_and_tool_calls(bot: App, base: str,
                                                                    fake_llm: FakeOpenAI):
    status, ctype, before = await get(f"{base}/metrics")
    assert status == 200 and ctype.startswith("text/plain") and "version=" in ctype
    assert value(before, "yokebot_turns_total", agent="tester", trigger="mention", status="ok") == 0

    fake_llm.calls(call("echo", {"text": "hi"}), call("boom", {})).reply("done", usage=(40, 2))
    await bot.service.handle(TurnRequest("slack", "C1", "t1", "go", "tester", trigger="mention"))
    fake_llm.fail(400, message="nope")
    await bot.service.handle(TurnRequest("slack", "C1", "t2", "fail", "tester", trigger="mention"))
    bot.metrics.adapter_event("slack", "mention")
    bot.metrics.schedule_run("tester/nightly", "ok")

    _, _, after = await get(f"{base}/metrics")
    assert value(after, "yokebot_turns_total", agent="tester", trigger="mention", status="ok") == 1
    assert value(after, "yokebot_turns_total", agent="tester", trigger="mention", status="error") == 1
    assert value(after, "yokebot_turn_duration_seconds_count", agent="tester") == 2
    assert value(after, "yokebot_turns_in_progress") == 0
    assert value(after, "yokebot_model_calls_total", agent="tester", model="test-model", outcome="ok") == 2
    assert value(after, "yokebot_model_calls_total", agent="tester", model="test-model", outcome="error") == 1
    tokens = {"agent": "tester", "model": "test-model"}
    assert value(after, "yokebot_model_tokens_total", **tokens, kind="prompt") == 50
    assert value(after, "yokebot_model_tokens_total", **tokens, kind="completion") == 7
    assert value(after, "yokebot_tool_calls_total", agent="tester", tool="echo", status="ok") == 1
    assert value(after, "yokebot_tool_calls_total", agent="tester", tool="boom", status="error") == 1
    assert value(after, "yokebot_adapter_events_total", platform="slack", kind="mention") == 1
    assert value(after, "yokebot_schedule_runs_total", schedule="tester/nightly", status="ok") == 1


async def test_tool_names_the_model_made_up_share_one_series(bot: App, base: str, fake_llm: FakeOpenAI):
    """The tool label of a call is the model's name for it: a model told by a log line to call 200 tools that do
    not exist added 200 series (a histogram's buckets each) to every scrape, for the process's life."""
    fake_llm.calls(*(call(f"made_up_{i}", {}, f"c{i}") for i in range(200)), call("echo", {"text": "hi"}, "e"))
    fake_llm.reply("done")
    await bot.service.handle(TurnRequest("slack", "C1", "t1", "go", "tester", trigger="mention"))
    _, _, body = await get(f"{base}/metrics")
    assert "made_up" not in body
    assert value(body, "yokebot_tool_calls_total", agent="tester", tool="(unknown)", status="error") == 200
    assert value(body, "yokebot_tool_calls_total", agent="tester", tool="echo", status="ok") == 1
    assert value(body, "yokebot_tool_call_duration_seconds_count", tool="(unknown)") == 200


async def test_a_flood_of_readyz_requests_is_one_database_check(bot: App):
    """`/readyz` commits a write to the database; where the port is reachable (Slack's HTTP events, Mattermost's
    commands) and no metrics token is set, each request of a flood was a commit, holding a pooled connection and
    SQLite's write lock that turns wait for. Now the requests of a second share one check."""
    from sqlalchemy import event

    writes: list[str] = []

    def seen(conn, cursor, statement, *_):  # type: ignore[no-untyped-def]
        if statement.startswith("UPDATE alembic_version"):
            writes.append(statement)

    event.listen(bot.engine.sync_engine, "before_cursor_execute", seen)
    try:
        async for url in serve(bot, ready_fresh=1.0):
            async with aiohttp.ClientSession() as s:
                async def ready(where: str) -> int:
                    async with s.get(where) as r:
                        return r.status

                where = f"{url}/readyz"
                statuses = [await ready(where), *await asyncio.gather(*(ready(where) for _ in range(200)))]
    finally:
        event.remove(bot.engine.sync_engine, "before_cursor_execute", seen)
    assert statuses == [200] * 201
    assert 1 <= len(writes) <= 3  # one check, perhaps another after its second


async def test_each_app_has_its_own_registry(bot: App, fake_llm: FakeOpenAI, agents_dir: Path,
                                             tmp_path: Path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'other.db'}"
    other = await build_app(make_settings(url, fake_llm, agents_dir), registry=registry())
    try:
        bot.metrics.adapter_event("discord", "message")
        assert bot.metrics.value("yokebot_adapter_events_total", platform="discord", kind="message") == 1
        assert other.metrics.value("yokebot_adapter_events_total", platform="discord", kind="message") == 0
    finally:
        await other.close()


async def test_readyz_fails_when_the_sqlite_file_is_gone(bot: App, base: str, sqlite_url: str):
    status, _, body = await get(f"{base}/readyz")
    assert status == 200 and '"database": "ok"' in body
    os.remove(sqlite_url.split("///", 1)[1])
    status, _, body = await get(f"{base}/readyz")
    assert status == 503 and "missing" in body
    assert (await get(f"{base}/healthz"))[0] == 200  # alive, not ready: restart is not the cure


async def test_readyz_fails_while_the_sqlite_database_cannot_be_written(bot: App, base: str, sqlite_url: str):
    """Issue 13: /readyz said 200 while every new event failed to be stored. A SELECT still passes while
    another process holds the file's write lock (or it cannot take a commit); the probe now writes."""
    import sqlite3

    holder = sqlite3.connect(sqlite_url.split("///", 1)[1], isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        status, _, body = await get(f"{base}/readyz")
        assert status == 503 and "database check failed" in body
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (await get(f"{base}/readyz"))[0] == 200


@pytest.mark.postgres
async def test_readyz_fails_when_the_postgres_database_is_gone(pg_database: str, fake_llm: FakeOpenAI,
                                                               agents_dir: Path):
    app = await build_app(make_settings(pg_database, fake_llm, agents_dir), registry=registry())
    try:
        async for base in serve(app):
            assert (await get(f"{base}/readyz"))[0] == 200
            name = pg_database.rsplit("/", 1)[1]
            await _pg_admin(f'DROP DATABASE "{name}" WITH (FORCE)')
            status, _, body = await get(f"{base}/readyz")
            assert status == 503 and "database check failed" in body
    finally:
        await app.close()


class NoProbeAdapter:
    """Stands in for the Slack/Discord adapters (built elsewhere): only the readiness probe matters here."""

    def __init__(self, platform: str, connected: bool) -> None:
        self.platform, self.connected = platform, connected

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def send(self, message: object) -> str: return ""
    async def post(self, channel: str, text: str, within: object = None) -> str: return ""


class StubAdapter(NoProbeAdapter):
    def is_connected(self) -> bool:
        return self.connected


async def test_readyz_reports_adapters(bot: App, base: str):
    slack = StubAdapter("slack", connected=False)
    bot.notifier.register(slack)  # type: ignore[arg-type]
    bot.notifier.register(NoProbeAdapter("discord", connected=False))  # type: ignore[arg-type]
    status, _, body = await get(f"{base}/readyz")
    assert status == 503 and '"slack": "disconnected"' in body and '"discord": "unknown"' in body
    slack.connected = True
    status, _, body = await get(f"{base}/readyz")
    assert status == 200 and '"slack": "connected"' in body


async def test_database_check_runs_a_real_query(bot: App):
    from bot.observability.http import database_ready

    async with bot.engine.begin() as conn:
        await conn.execute(text("DROP TABLE alembic_version"))
    ok, detail = await database_ready(bot.engine)
    assert not ok and "database check failed" in detail


async def test_a_metrics_token_guards_metrics_and_readyz_but_not_healthz(bot: App, caplog: pytest.LogCaptureFixture):
    token = "m3trics-t0ken-" + "x" * 20
    async for base in serve(bot, token=token):
        for path in ("/metrics", "/readyz"):
            for headers in (None, {"Authorization": "Bearer wrong"}, {"Authorization": token},
                            {"Authorization": f"Bearer {token}x"}, {"Authorization": f"Basic {token}"}):
                status, _, body = await get(f"{base}{path}", headers)
                assert status == 401, (path, headers)
                assert "yokebot_" not in body and "database" not in body and token not in body
        status, _, body = await get(f"{base}/metrics", {"Authorization": f"Bearer {token}"})
        assert status == 200 and "yokebot_turns_in_progress" in body
        status, _, body = await get(f"{base}/readyz", {"Authorization": f"Bearer {token}"})
        assert status == 200 and '"database": "ok"' in body
        assert (await get(f"{base}/healthz"))[0] == 200  # liveness probes send no header
    assert token not in caplog.text


def test_the_metrics_token_is_a_secret_setting(monkeypatch: pytest.MonkeyPatch):
    from bot.config import Settings

    monkeypatch.setenv("YOKEBOT_METRICS_TOKEN", "abc-123-secret")
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.metrics_token is not None and settings.metrics_token.get_secret_value() == "abc-123-secret"
    assert "abc-123-secret" in settings.secret_values() and "abc-123-secret" not in repr(settings)
