"""Exactly-once claims of platform events (and new sessions), committed in groups.

A burst of Slack events (a busy channel, or Slack redelivering after an outage) must be acknowledged within
3 s, and each claim is written before its ack. One transaction per claim made 200 events queue for the
database; here, claims that arrive while a transaction runs go into the next one, a single
`INSERT ... ON CONFLICT DO NOTHING RETURNING`: each caller still learns whether its key was new (and, for the
inbox, what the new row is). The sessions of a burst of new threads go in the same way (one INSERT for all the
threads that opened while the last one ran)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

Key = tuple[str, str]  # (platform, event id)
K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


class BatchedInsert(Generic[K, R]):
    """`claim(key, payload)` returns what `insert_new` returned for the key when it was new, else None."""

    def __init__(self, insert_new: Callable[[Sequence[tuple[K, Any]]], Awaitable[dict[K, R]]]) -> None:
        self._insert_new = insert_new
        self._pending: list[tuple[K, Any, asyncio.Future[R | None]]] = []
        self._draining = False

    async def claim(self, key: K, payload: Any = None) -> R | None:
        future: asyncio.Future[R | None] = asyncio.get_running_loop().create_future()
        self._pending.append((key, payload, future))
        if not self._draining:
            self._draining = True
            asyncio.get_running_loop().create_task(self._drain(), name="yokebot-claims")
        return await future

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                firsts = list({key: (key, payload) for key, payload, _ in reversed(batch)}.values())[::-1]
                try:
                    new = await self._insert_new(firsts)
                except Exception as exc:  # the database is down: every waiting event hears it
                    for _, _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for key, _, future in batch:
                    # the first of several deliveries in one group wins; the rest are duplicates
                    if not future.done():
                        future.set_result(new.pop(key, None))
        finally:
            self._draining = False
