"""PostgreSQL behind a connection pooler (PgBouncer, a managed offering's pooler): what a URL leads to
(`probe`), and the engine settings that make statements safe through it (`POOLED_CONNECT_ARGS`).

A transaction pooler lends a server connection to a client for one transaction at a time. Two things break:
- named prepared statements: asyncpg caches one per statement text per connection, and SQLAlchemy's dialect
  prepares every statement under a numbered name; the next client of that server connection finds the name
  taken (`prepared statement "__asyncpg_stmt_2__" already exists`), or its own is on another server connection.
  Through a pooler no statement is named: asyncpg's cache and SQLAlchemy's are off and SQLAlchemy's name is the
  empty one, so asyncpg sends the statement's Parse again with its Bind, in the round trip that runs it (PgBouncer
  1.18 takes a Flush for the end of a transaction). Nothing outlives a statement: no name to collide, none to
  pile up on the server connections (unique names would, until PgBouncer recycles them).
- what belongs to a database session: advisory locks (the thread locks, the scheduler's leader, migrations),
  LISTEN, the server process a connection talks to (the writer's lost-commit check ends it). Those go on
  YOKEBOT_DATABASE_DIRECT_URL (docs/scale-out.md says why that, not transaction-scoped substitutes).

Session pooling keeps a server connection per client connection: everything works through it, but the server
process id asyncpg is told at connect is the pooler's own; the writer asks the server for it."""

from __future__ import annotations

from typing import Any, Literal

from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

Pooling = Literal["direct", "session", "transaction"]
DIRECT_URL = "YOKEBOT_DATABASE_DIRECT_URL"


def _unnamed() -> str:
    return ""


# asyncpg's statement cache off (its statements unnamed), SQLAlchemy's off, and its statements unnamed too
POOLED_CONNECT_ARGS: dict[str, Any] = {"statement_cache_size": 0, "prepared_statement_cache_size": 0,
                                       "prepared_statement_name_func": _unnamed}


class PoolerMisconfigured(Exception):
    """A pooler is in the way of what needs a database session of its own; the message is one sentence."""


async def probe(url: str) -> Pooling:
    """What `url` leads to: PostgreSQL itself, or a pooler in session or in transaction (or statement) pooling.

    A pooler answers the connection's start with a process id of its own: asyncpg's `get_server_pid()` differs
    from the server's `pg_backend_pid()`. Then two clients: the first asks the server process it is on, the second
    asks in an open transaction, the first asks again. In transaction pooling the second is lent the server
    connection the first has just given back (or the first is moved to another one); in session pooling each
    keeps its own."""
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT",
                                 connect_args=POOLED_CONNECT_ARGS | {"timeout": 10})
    try:
        async with engine.connect() as first_conn:
            first: Any = (await first_conn.get_raw_connection()).driver_connection
            before = await first.fetchval("SELECT pg_backend_pid()")
            if before == first.get_server_pid():
                return "direct"
            async with engine.connect() as second_conn:
                second: Any = (await second_conn.get_raw_connection()).driver_connection
                async with second.transaction():
                    other = await second.fetchval("SELECT pg_backend_pid()")
                    after = await first.fetchval("SELECT pg_backend_pid()")
            return "transaction" if other == before or after != before else "session"
    finally:
        await engine.dispose()


def misconfigured(pooling: Pooling, direct_url: str | None, *, direct_pooling: Pooling | None = None) -> str | None:
    """The one sentence that stops a process running turns, or None when the guarantees hold."""
    if direct_pooling == "transaction":
        return (f"{DIRECT_URL} goes through a pooler in transaction pooling too: point it at PostgreSQL itself (or "
                "at a session-pooling port) for the locks, the wake-ups and the writer (docs/scale-out.md).")
    if pooling == "transaction" and direct_url is None:
        return (f"YOKEBOT_DATABASE_URL goes through a pooler in transaction pooling (PgBouncer), where the thread "
                f"locks, the scheduler's leader, the wake-ups and the writer's lost-commit check cannot hold: set "
                f"{DIRECT_URL} to a direct connection to the same database (docs/scale-out.md).")
    return None


def is_postgres(url: str) -> bool:
    return make_url(url).get_backend_name() == "postgresql"
