"""A database that is away, as opposed to one that refused a row: how an error is told apart (`transient`) and
how its return is waited for (`back_within`). The write-behind queue holds its rows through an outage
(bot/store/writer.py); a turn that met one before it started waits here and starts again (bot/store/inbox.py)."""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

log = logging.getLogger(__name__)

# SQLSTATEs of a server that is away rather than of a refused row: class 08 (the connection failed or was lost),
# 57P01-57P03 (an administrator or a crash ended the session; the server is shutting down or starting up), 53300
# (too many connections). SQLAlchemy's asyncpg dialect wraps most of them in its plain `Error` (a DBAPIError that
# is neither operational nor an interface error), so the class of the exception does not tell them apart.
_OUTAGE_STATES = ("08", "57P01", "57P02", "57P03", "53300")


def transient(exc: BaseException) -> bool:
    """Worth retrying: the database is busy, restarting or unreachable. A bad row is not. Asked of the error
    and of what it wraps (SQLAlchemy's, the dialect's, the driver's): the one-statement batch runs on asyncpg
    itself, so its errors arrive unwrapped; through SQLAlchemy, a server stopping or starting is a plain
    DBAPIError whose driver error carries the SQLSTATE."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    seen: set[int] = set()
    err: BaseException | None = exc
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OperationalError | InterfaceError | OSError):
            return True
        state = getattr(err, "sqlstate", None)
        if isinstance(state, str) and state.startswith(_OUTAGE_STATES):
            return True
        if type(err).__module__.startswith("asyncpg"):
            import asyncpg.exceptions as pg  # pyright: ignore[reportMissingTypeStubs]  (loaded: its error is here)

            if isinstance(err, pg.PostgresConnectionError | pg.OperatorInterventionError | pg.InterfaceError):
                return True
        orig = getattr(err, "orig", None)
        err = orig if isinstance(orig, BaseException) else err.__cause__
    return False


async def back_within(engine: AsyncEngine, seconds: float, *, poll: float = 0.2, max_poll: float = 2.0) -> bool:
    """Ask the database (`SELECT 1`) until it answers or `seconds` have passed; True once it answered. The
    waits double from `poll` to `max_poll`, as the writer's retries do."""
    loop = asyncio.get_running_loop()
    deadline, wait = loop.time() + seconds, poll
    while True:
        try:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
            return True
        except Exception as exc:
            if not transient(exc):
                log.warning("the database answered the check with an error: %s", type(exc).__name__)
                return False
        left = deadline - loop.time()
        if left <= 0:
            return False
        await asyncio.sleep(min(wait, left))
        wait = min(wait * 2, max_poll)
