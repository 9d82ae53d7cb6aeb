"""PostgreSQL LISTEN/NOTIFY for the inbox's turn order (`PgWakeups`): an instance that closes an inbox row
says so on channel `yokebot_inbox`, the payload the row's conversation key (`bot.records.inbox.conversation`);
every instance wakes the turns of that conversation waiting for their turn (bot/chat/core/inbox_turns.py).

One connection of its own, in autocommit, opened at the first use. A notification is a hint, not a promise:
the waiting turns also look again every `ORDER_POLL_SECONDS`, so a notification lost while the connection was
down (an outage; it is opened again at the next use) delays a turn by that much at most."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.store.db import create_engine

log = logging.getLogger(__name__)
CHANNEL = "yokebot_inbox"
CONNECT_SECONDS = 5.0  # a database that is away does not hold a turn's look at the inbox for long


class PgWakeups:
    def __init__(self, engine: AsyncEngine, wake: Callable[[str], None]) -> None:
        self.engine, self.wake = engine, wake
        self._conn: AsyncConnection | None = None
        self._driver: Any = None
        self._io = asyncio.Lock()  # one statement at a time on the connection

    @classmethod
    def for_engine(cls, engine: AsyncEngine, wake: Callable[[str], None]) -> PgWakeups:
        url = engine.url.render_as_string(hide_password=False)
        return cls(create_engine(url, pool_size=1, max_overflow=0, isolation_level="AUTOCOMMIT",
                                 connect_args={"timeout": CONNECT_SECONDS}), wake)

    def _heard(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self.wake(payload)

    async def _connected(self) -> Any:
        if self._driver is not None and not self._driver.is_closed():
            return self._driver
        if self._conn is not None:
            conn, self._conn, self._driver = self._conn, None, None
            await conn.invalidate()
        self._conn = await self.engine.connect()
        self._driver = (await self._conn.get_raw_connection()).driver_connection
        await self._driver.add_listener(CHANNEL, self._heard)
        return self._driver

    async def listen(self) -> bool:
        """Listening from now on (before the caller looks at the inbox: no close after the look is missed);
        False when the database cannot be reached (the caller polls)."""
        try:
            async with self._io:
                await self._connected()
            return True
        except Exception as exc:
            log.debug("cannot listen for inbox changes (%s)", type(exc).__name__)
            return False

    async def notify(self, key: str) -> None:
        try:
            async with self._io:
                await (await self._connected()).execute("SELECT pg_notify($1, $2)", CHANNEL, key)
        except Exception as exc:  # the other instances find out at their next look
            log.debug("could not notify the other instances (%s)", type(exc).__name__)

    async def close(self) -> None:
        async with self._io:
            if self._conn is not None:
                conn, self._conn, self._driver = self._conn, None, None
                try:
                    await conn.close()
                except Exception as exc:
                    log.debug("closing the inbox's listening connection failed (%s)", type(exc).__name__)
        await self.engine.dispose()
