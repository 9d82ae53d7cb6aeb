"""The PostgreSQL thread locks: one turn per thread across instances, no cap on the turns in flight, and a
turn cancelled while it waits or holds leaves nothing locked."""

from __future__ import annotations

import asyncio

import pytest

from bot.store.session_lock import PgSessionLock

pytestmark = pytest.mark.postgres


@pytest.fixture
async def locks(pg_database: str):
    made: list[PgSessionLock] = []

    def new() -> PgSessionLock:
        lock = PgSessionLock.for_url(pg_database)
        lock.poll = 0.01
        made.append(lock)
        return lock

    yield new
    for lock in made:
        await lock.close()


async def most_at_once(lock, threads: int, seconds: float) -> int:
    """`threads` turns, each holding its own thread's lock for `seconds`: how many held theirs at once."""
    inside = most = 0

    async def turn(n: int) -> None:
        nonlocal inside, most
        async with lock.hold(f"slack/C1/{n}"):
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(seconds)
            inside -= 1

    await asyncio.gather(*(turn(n) for n in range(threads)))
    return most


async def test_many_threads_hold_their_locks_at_once(locks):
    lock = locks()
    started = asyncio.get_running_loop().time()
    most = await most_at_once(lock, 60, 0.2)
    # 60 turns in flight together (a connection per lock capped them at the pool's 16)
    assert most == 60
    assert asyncio.get_running_loop().time() - started < 2.0


async def test_a_second_instance_waits_for_the_thread_and_gets_it_when_it_is_free(locks):
    first, second = locks(), locks()
    order: list[str] = []
    held = asyncio.Event()

    async def one() -> None:
        async with first.hold("slack/C1/t"):
            order.append("first in")
            held.set()
            await asyncio.sleep(0.3)
            order.append("first out")

    async def two() -> None:
        await held.wait()  # the first instance has the thread (its lock connection may take a while to open)
        async with second.hold("slack/C1/t"):
            order.append("second in")
        async with second.hold("slack/C1/other"):  # other threads were never held up
            order.append("other")

    await asyncio.gather(one(), two())
    assert order == ["first in", "first out", "second in", "other"]


async def test_a_turn_cancelled_while_waiting_or_holding_leaves_the_thread_free(locks):
    first, second = locks(), locks()
    held = asyncio.Event()

    async def holder() -> None:
        async with first.hold("slack/C1/t"):
            held.set()
            await asyncio.sleep(60)

    async def waiter() -> None:
        async with second.hold("slack/C1/t"):
            await asyncio.sleep(60)

    h = asyncio.create_task(holder())
    await held.wait()
    w = asyncio.create_task(waiter())
    await asyncio.sleep(0.1)  # the waiter is polling
    w.cancel()
    h.cancel()
    await asyncio.gather(h, w, return_exceptions=True)
    # both instances can take it again at once: nothing was left locked on either connection
    for lock in (second, first):
        async with asyncio.timeout(1):
            async with lock.hold("slack/C1/t"):
                pass


async def test_locks_asked_for_together_share_round_trips(locks):
    lock = locks()
    async with lock.hold("slack/C1/warm"):  # the connection is open
        pass
    trips = 0
    real = lock._send  # one round trip (one statement) per call

    async def counted(batch):
        nonlocal trips
        trips += 1
        await real(batch)

    lock._send = counted
    most = await most_at_once(lock, 100, 0.05)
    assert most == 100
    # 100 takes and 100 releases: one round trip each was 200; queued ones go together
    assert trips < 50
    other = locks()  # and every lock was released
    for n in range(100):
        async with asyncio.timeout(1):
            async with other.hold(f"slack/C1/{n}"):
                pass


async def test_the_next_turn_of_a_thread_holds_it_though_the_last_turns_release_is_not_waited_for(locks):
    """A turn does not wait for its lock's release (it goes in the background); the same instance's next turn
    of the thread, asking at once, may share a round trip with it and must still hold the thread."""
    first, second = locks(), locks()
    async with first.hold("slack/C1/t"):
        pass
    async with first.hold("slack/C1/t"):
        await asyncio.sleep(0.05)  # the release of the last turn has surely been sent by now
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                async with second.hold("slack/C1/t"):
                    pass
    async with asyncio.timeout(2):  # once the turn is over, the other instance gets the thread
        async with second.hold("slack/C1/t"):
            pass

