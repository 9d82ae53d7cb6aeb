"""The reply pacer: a burst of replies is spread over loop iterations, in order; a lone reply never waits;
a waiter cancelled in the queue does not hold up the ones behind it."""

from __future__ import annotations

import asyncio
import time

from bot.engine.model.pacing import Pacer
from tests.fakes.openai_server import Step


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


async def test_a_burst_of_new_threads_starts_its_turns_over_several_iterations(bot, fake_llm):
    """The burst's new sessions are opened by one INSERT, so its turns all wake in one loop iteration; their
    work up to the first model call (here 1 ms each, in a hook) ran there together, 60 ms in which the loop
    answered nothing else (bench/concurrency.py's longest stall). Now it is spread, each turn in its turn."""
    from bot.engine.run.hooks import TurnHooks
    from bot.engine.service import TurnRequest

    fake_llm.handler = lambda _body: Step("reply", content="ok")
    iterations = Iterations()
    started: list[int] = []

    class Costly(TurnHooks):
        async def turn_started(self, run, text):
            started.append(iterations.n)
            time.sleep(0.001)

    requests = [TurnRequest(platform="test", channel="C1", thread=f"t{i}", text="hi", agent="tester",
                            trigger="mention", user="U1") for i in range(60)]
    results = await asyncio.gather(*(bot.service.handle(r, Costly()) for r in requests))
    iterations.stop()
    assert all(r.answer == "ok" for r in results)
    per_iteration: dict[int, int] = {}
    for n in started:
        per_iteration[n] = per_iteration.get(n, 0) + 1
    assert max(per_iteration.values()) <= 16, per_iteration
