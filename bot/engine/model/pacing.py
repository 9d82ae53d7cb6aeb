"""Spreading a burst of model replies over several event-loop iterations instead of one.

Why: when 200 turns' replies arrive at the same moment, the loop finds 200 ready sockets in one poll, and
each turn's next step (the SDK reading the reply, the audit rows, the tools, the next request) runs in
the same loop iteration: about 1 ms each, so the loop does nothing else for ~200 ms (bench/README.md,
benchmark 2), and a Slack ack or a health check waits that long. The work is not less if it is spread;
it just stops blocking everything else.

How: every model reply passes `Pacer.pace()` as soon as its headers are in (the model client's response
hook). Replies pass at once while the current loop iteration has spent less than `budget` on them; the
rest queue, in order, and are let through a batch per iteration (a batch sized so that it takes about
`budget`, from what the last one took). Between two batches the loop runs its other callbacks and timers.
A lone reply, or a few, never waits: the queue exists only inside a burst."""

from __future__ import annotations

import asyncio
import time
from collections import deque

BUDGET_SECONDS = 0.004  # reply work per loop iteration before the rest wait for the next one
MAX_BATCH = 64


class Pacer:
    def __init__(self, budget: float = BUDGET_SECONDS) -> None:
        self.budget = budget
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._open = False  # a slice (this iteration's share) is under way; its close is scheduled
        self._started: float | None = None  # when its first reply went through
        self._passed = 0  # replies let through in the slice
        self.waited = 0  # replies that had to wait for a later iteration (for tests and benchmarks)

    async def pace(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new loop (tests, `asyncio.run` again): nothing of the old one holds
            self._loop, self._waiters, self._open, self._started, self._passed = loop, deque(), False, None, 0
        now = time.perf_counter()
        if not self._waiters and not (self._open and self._started is not None
                                      and now - self._started >= self.budget):
            self._through(loop, now)
            return
        future: asyncio.Future[None] = loop.create_future()
        self._waiters.append(future)
        self.waited += 1
        self._schedule_close(loop)
        await future  # a place in a later slice (cancelled meanwhile: the place goes to the next one)
        self._through(loop, time.perf_counter())

    def _through(self, loop: asyncio.AbstractEventLoop, now: float) -> None:
        if self._started is None:
            self._started = now
        self._passed += 1
        self._schedule_close(loop)

    def _schedule_close(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._open:
            self._open = True
            loop.call_soon(self._close)  # runs after this iteration's ready callbacks

    def _close(self) -> None:
        """The slice is over: the next batch of waiters gets the next one."""
        took = time.perf_counter() - self._started if self._started is not None else 0.0
        passed = self._passed
        self._open, self._started, self._passed = False, None, 0
        while self._waiters and self._waiters[0].done():  # cancelled while waiting
            self._waiters.popleft()
        if not self._waiters:
            return
        batch = MAX_BATCH if took <= 0 else int(passed * self.budget / took)
        for _ in range(max(1, min(MAX_BATCH, batch))):
            if not self._waiters:
                break
            future = self._waiters.popleft()
            if not future.done():
                future.set_result(None)
        assert self._loop is not None
        self._schedule_close(self._loop)  # after the woken ones have run (their steps are queued before it)


REPLIES = Pacer()  # the model replies of this process (every model client shares it)
# turns whose sessions were opened together (one INSERT for a burst's new threads) wake together: their steps
# up to the first model call go through a pacer of their own (a step of theirs costs a tenth of a reply's, and
# one queue for both would size its batches from the wrong kind)
STARTS = Pacer()


async def pace_reply(_response: object) -> None:
    """The model client's response hook: wait for this reply's place in a burst."""
    await REPLIES.pace()
