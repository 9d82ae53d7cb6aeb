"""Exactly-once claims of platform events, committed in groups.

A burst of Slack events (a busy channel, or Slack redelivering after an outage) must be acknowledged within
3 s, and each claim is written before its ack. One transaction per claim made 200 events queue for the
database; here, claims that arrive while a transaction runs go into the next one, a single
`INSERT ... ON CONFLICT DO NOTHING RETURNING`: each caller still learns whether its key was new."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

Key = tuple[str, str]  # (platform, event id)
InsertNew = Callable[[Sequence[Key]], Awaitable[set[Key]]]


class GroupedClaims:
    def __init__(self, insert_new: InsertNew) -> None:
        self._insert_new = insert_new
        self._pending: list[tuple[Key, asyncio.Future[bool]]] = []
        self._draining = False

    async def claim(self, platform: str, event_id: str) -> bool:
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.append(((platform, event_id), future))
        if not self._draining:
            self._draining = True
            asyncio.get_running_loop().create_task(self._drain(), name="yokebot-claims")
        return await future

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                keys = list(dict.fromkeys(key for key, _ in batch))
                try:
                    new = await self._insert_new(keys)
                except Exception as exc:  # the database is down: every waiting event hears it
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for key, future in batch:
                    # the first of several deliveries in one group wins; the rest are duplicates
                    first = key in new
                    new.discard(key)
                    if not future.done():
                        future.set_result(first)
        finally:
            self._draining = False
