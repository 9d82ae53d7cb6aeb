from __future__ import annotations

import asyncio
import os

# pytest-xdist's workers start with COLUMNS=80 in the environment. Rich fixes a console's width from COLUMNS when
# the console is made, so the CLI's module-level consoles would keep 80 for every test of that worker, whatever
# width a test asks for with CliRunner(env={"COLUMNS": ...}). Without it, a console reads the width when it prints.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from bot.app import App, build_app
from bot.config import Settings
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.mattermost import FakeMattermost
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.pgbouncer import PgBouncer, PooledUrl, direct_of
from tests.fakes.slack_server import FakeSlack
from tests.fakes.teams import FakeTeams
from tests.helpers import registry, write_agent

PG_ADMIN_URL = os.environ.get("YOKEBOT_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres")
REQUIRE_PG = os.environ.get("YOKEBOT_REQUIRE_PG") == "1"

# Modules whose tests start real `yokebot` processes (seconds each): `slow`, so `make test-fast` leaves them out.
SLOW_MODULES = ("tests/recovery/", "tests/eval/test_eval_cli.py", "tests/bench/", "tests/test_cli", "tests/test_doctor.py",
                "tests/mcp/test_mcp_processes.py", "tests/mcp/test_mcp_startup.py", "tests/scheduling/test_cli.py",
                "tests/approvals/test_terminal.py", "tests/observability/test_run.py", "tests/test_startup_imports.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).resolve().parents[1]
    for item in items:
        where = item.path.resolve().relative_to(root).as_posix()
        if where.startswith(SLOW_MODULES):
            item.add_marker(pytest.mark.slow)


TEST_AGENT = """
description: test agent
tools: [echo, boom, slow, flaky, current_time]
max_iterations: 4
"""


def _pg_url(database: str) -> str:
    return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{database}"


async def _pg_admin(sql: str) -> None:
    import asyncpg

    dsn = PG_ADMIN_URL.replace("postgresql+asyncpg", "postgresql")
    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def pg_available() -> bool:
    try:
        asyncio.run(_pg_admin("SELECT 1"))
        return True
    except Exception:
        return False


_PG_OK: bool | None = None


def need_pg() -> None:
    global _PG_OK
    if _PG_OK is None:
        _PG_OK = pg_available()
    if not _PG_OK:
        if REQUIRE_PG:
            pytest.fail(f"PostgreSQL is required (YOKEBOT_REQUIRE_PG=1) but {PG_ADMIN_URL} is not reachable")
        pytest.skip("PostgreSQL is not reachable")


PgRoute = Literal["direct", "transaction", "session"]
_POOLERS: dict[str, PgBouncer] = {}  # one PgBouncer per pool mode per test process, started at first use


@pytest.fixture
def pg_route() -> PgRoute:
    """How `pg_database` is reached: straight, or through a real PgBouncer (`via_pgbouncer` in a module runs its
    PostgreSQL tests each way)."""
    return "direct"


@pytest.fixture(params=["direct", pytest.param("transaction", id="pgbouncer-transaction"),
                        pytest.param("session", id="pgbouncer-session")])
def via_pgbouncer(request: pytest.FixtureRequest) -> PgRoute:
    """Assign to `pg_route` in a test module (`pg_route = via_pgbouncer`): its tests that use `pg_database` run
    direct and through PgBouncer in transaction and in session pooling."""
    return request.param


# a module's `pytestmark`: its PostgreSQL tests run direct and through PgBouncer in transaction pooling
DIRECT_AND_TRANSACTION_POOLING = pytest.mark.parametrize(
    "pg_route", ["direct", pytest.param("transaction", id="pgbouncer-transaction")])


def pgbouncer(mode: Literal["transaction", "session"]) -> PgBouncer:
    if mode not in _POOLERS:
        _POOLERS[mode] = PgBouncer(mode, server_port=make_url(PG_ADMIN_URL).port or 5432).start()
    return _POOLERS[mode]


def pytest_sessionfinish(session: pytest.Session) -> None:
    for pooler in _POOLERS.values():
        pooler.close()


def _database(route: PgRoute) -> Iterator[str]:
    need_pg()
    name = f"yokebot_test_{uuid.uuid4().hex[:10]}"
    asyncio.run(_pg_admin(f'CREATE DATABASE "{name}"'))
    try:
        if route == "direct":
            yield _pg_url(name)
        else:
            yield PooledUrl(pgbouncer(route).url(name), direct=_pg_url(name))
    finally:
        asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def pg_database(pg_route: PgRoute) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test; dropped afterwards. Through PgBouncer (`pg_route`), the URL
    is a `PooledUrl`: its `direct` is the same database's direct URL (YOKEBOT_DATABASE_DIRECT_URL)."""
    yield from _database(pg_route)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'yokebot.db'}"
    return request.getfixturevalue("pg_database")


_SQLITE = "sqlite"
_PG = pytest.param("direct", id="postgresql", marks=pytest.mark.postgres)
_TRANSACTION = pytest.param("transaction", id="pgbouncer-transaction", marks=pytest.mark.postgres)
_SESSION = pytest.param("session", id="pgbouncer-session", marks=pytest.mark.postgres)


def _any_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'yokebot.db'}"
        return
    yield from _database(request.param)


@pytest.fixture(params=[_SQLITE, _PG, _TRANSACTION, _SESSION])
def db_url_via_pgbouncer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """`db_url`, and PostgreSQL through PgBouncer too: a module assigns it (`db_url = db_url_via_pgbouncer`)."""
    yield from _any_database(request, tmp_path)


@pytest.fixture(params=[_SQLITE, _PG, _TRANSACTION])
def db_url_via_transaction_pooling(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """`db_url`, and PostgreSQL through PgBouncer in transaction pooling (for the slower tests)."""
    yield from _any_database(request, tmp_path)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'yokebot.db'}"


@pytest.fixture
def fake_llm() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    server = FakeSlack().start()
    yield server
    server.stop()


@pytest.fixture
def fake_discord() -> Iterator[FakeDiscord]:
    server = FakeDiscord().start()
    yield server
    server.stop()


@pytest.fixture
def fake_teams() -> Iterator[FakeTeams]:
    server = FakeTeams().start()
    yield server
    server.stop()


@pytest.fixture
def fake_mattermost() -> Iterator[FakeMattermost]:
    server = FakeMattermost().start()
    yield server
    server.stop()


@pytest.fixture
def agents_dir(tmp_path: Path) -> Path:
    d = tmp_path / "agents"
    write_agent(d, "tester", TEST_AGENT)
    return d


def make_settings(db: str, llm: FakeOpenAI, agents: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = dict(
        database_url=db, agents_dir=agents, default_agent="tester", openai_base_url=llm.base_url,
        openai_api_key="sk-test-key-123", model="test-model", model_retry_base_seconds=0.01,
        model_retry_max_wait_seconds=0.2, tool_backoff_seconds=0.01, model_timeout_seconds=5,
        progress_live=False,  # tests of live progress turn it on (tests/chat/test_progress_*.py)
        database_direct_url=direct_of(db),  # through PgBouncer: the same database, direct
    )
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@pytest.fixture
async def bot(sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path) -> AsyncIterator[App]:
    app = await build_app(make_settings(sqlite_url, fake_llm, agents_dir), registry=registry())
    yield app
    await app.close()


@pytest.fixture
async def any_bot(db_url: str, fake_llm: FakeOpenAI, agents_dir: Path) -> AsyncIterator[App]:
    """The same bot on SQLite and on PostgreSQL."""
    app = await build_app(make_settings(db_url, fake_llm, agents_dir), registry=registry())
    yield app
    await app.close()


async def rows(app: App, sql: str, **params: Any) -> list[Any]:
    async with app.engine.connect() as conn:
        return list((await conn.execute(text(sql), params)).all())
