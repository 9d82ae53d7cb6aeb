"""The reply pacer: a burst of replies is spread over loop iterations, in order; a lone reply never waits;
a waiter cancelled in the queue does not hold up the ones behind it."""

from __future__ import annotations

import asyncio
import time

from bot.engine.pacing import Pacer


class Iterations:
    """Counts event-loop iterations: a callback that reschedules itself runs once per iteration."""

    def __init__(self) -> None:
        self.n = 0
        self._on = True
        asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self.n += 1
        if self._on:
            asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        self._on = False


async def test_a_lone_reply_goes_through_at_once():
    pacer = Pacer()
    for _ in range(5):
        await pacer.pace()
        await asyncio.sleep(0.01)  # each on its own, as replies that do not arrive together
    assert pacer.waited == 0


async def test_a_burst_is_spread_over_iterations_in_order():
    pacer = Pacer(budget=0.004)
    iterations = Iterations()
    ran: list[tuple[int, int]] = []  # (reply, loop iteration it ran in)
    gate = asyncio.Event()

    async def reply(i: int) -> None:
        await gate.wait()  # all 100 become ready in the same iteration, as a burst of replies does
        await pacer.pace()
        ran.append((i, iterations.n))
        time.sleep(0.001)  # the reply's work: 1 ms of the loop's time

    tasks = [asyncio.create_task(reply(i)) for i in range(100)]
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(*tasks)
    iterations.stop()
    assert [i for i, _ in ran] == list(range(100))  # first come, first served
    per_iteration: dict[int, int] = {}
    for _, n in ran:
        per_iteration[n] = per_iteration.get(n, 0) + 1
    # without the pacer all 100 (100 ms) run in one iteration; with it, about budget / 1 ms at a time
    assert max(per_iteration.values()) <= 16
    assert len(per_iteration) >= 100 // 16
    assert pacer.waited > 0


async def test_a_waiter_cancelled_in_the_queue_does_not_hold_up_the_rest():
    pacer = Pacer(budget=0.001)
    gate = asyncio.Event()
    done: list[int] = []

    async def reply(i: int) -> None:
        await gate.wait()
        await pacer.pace()
        time.sleep(0.002)
        done.append(i)

    tasks = [asyncio.create_task(reply(i)) for i in range(20)]
    await asyncio.sleep(0)
    gate.set()
    await asyncio.sleep(0)  # they queue behind the first
    await asyncio.sleep(0)
    tasks[10].cancel()
    async with asyncio.timeout(10):
        await asyncio.gather(*tasks, return_exceptions=True)
    assert sorted(done) == [i for i in range(20) if i != 10]
