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
    """`claim(key, payload)` returns what `insert_new` returned for the key when it was new, else None.

    The claims asked while an INSERT runs go into the next one. One INSERT at a time: the rows' ids follow
    the order in which the events arrived, which orders a thread's messages (`InboxTurns.in_order`); three
    at once measured no better on a burst of 200 (bench/slack_ack.py)."""

    def __init__(self, insert_new: Callable[[Sequence[tuple[K, Any]]], Awaitable[dict[K, R]]]) -> None:
        self._insert_new = insert_new
        self._pending: list[tuple[K, Any, asyncio.Future[R | None]]] = []
        self._scheduled = False
        self._running = False
        self._tasks: set[asyncio.Task[None]] = set()

    async def claim(self, key: K, payload: Any = None) -> R | None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R | None] = loop.create_future()
        self._pending.append((key, payload, future))
        if not self._running and not self._scheduled and len(self._pending) == 1:
            # nothing else waits: it goes at once, from here (what arrives meanwhile goes in the next)
            self._running = True
            batch, self._pending = self._pending, []
            try:
                await self._insert(batch)
            finally:
                self._ended()
            return future.result()
        if not self._scheduled:  # at the end of this turn of the loop: the claims asked meanwhile join it
            self._scheduled = True
            loop.call_soon(self._start)
        return await future

    def _start(self) -> None:
        self._scheduled = False
        if not self._pending or self._running:
            return  # the one running starts what is pending when it ends
        self._running = True
        task = asyncio.get_running_loop().create_task(self._drain(), name="yokebot-claims")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain(self) -> None:
        """The batches one after the other, each sent in the same step of the loop that heard the last one end:
        in a burst the loop is busy, and a new task per batch waited a whole (long) turn of it to start."""
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                await self._insert(batch)
        finally:
            self._ended()

    def _ended(self) -> None:
        self._running = False
        if self._pending and not self._scheduled:
            self._start()

    async def _insert(self, batch: list[tuple[K, Any, asyncio.Future[R | None]]]) -> None:
        firsts = list({key: (key, payload) for key, payload, _ in reversed(batch)}.values())[::-1]
        try:
            new = await self._insert_new(firsts)
        except Exception as exc:  # the database is down: every waiting event hears it
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for key, _, future in batch:
            # the first of several deliveries in one group wins; the rest are duplicates
            if not future.done():
                future.set_result(new.pop(key, None))
