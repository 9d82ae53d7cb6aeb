"""The durable inbox: an event is stored with its claim (a redelivery is not), leases run out and are taken
over by exactly one instance, renewed leases are not taken, and a finished event is never taken over."""

from __future__ import annotations

import asyncio

from sqlalchemy import text

from bot.records.inbox import NewEvent
from bot.store.inbox import SqlInbox
from bot.store.repositories import SqlStore
from tests.conftest import db_url_via_pgbouncer as db_url  # noqa: F401  (direct, and through PgBouncer)


def event(n: int) -> NewEvent:
    return NewEvent("slack", f"C1:{n}", "C1", f"{n}.0", f"question {n}", "mention", "U1",
                    {"message_id": f"{n}.0", "reply_thread": f"{n}.0"})


async def test_claim_stores_the_event_once_and_leases_it(store: SqlStore):
    inbox = SqlInbox(store, lease_seconds=30)
    items = await asyncio.gather(*(inbox.claim(event(n)) for n in (1, 2, 1, 1)))
    assert [i is not None for i in items] == [True, True, False, False]
    again = await SqlInbox(store).claim(event(2))  # another instance, or after a restart: a duplicate
    assert again is None
    first = items[0]
    assert first is not None and (first.text, first.reply["reply_thread"], first.state) == ("question 1", "1.0",
                                                                                             "claimed")
    assert await SqlInbox(store).take_over() == []  # leased, not expired


async def test_a_claimed_item_is_its_row_as_stored_even_with_a_key_longer_than_its_column(store: SqlStore):
    """The claim builds its item from what it wrote (only the id comes back): it must be what a take-over reads.
    A key longer than its column (255) is stored cut; before, the claim then took its own row for a duplicate's,
    and the event was acknowledged and never answered."""
    inbox = SqlInbox(store, lease_seconds=0.05)
    long = NewEvent("discord", "k" * 300, "C1", "t1", "a NUL\x00 here", "mention", "U1",
                    {"message_id": "m1", "files": [{"name": "log.txt", "size": 12}]})
    claimed = await inbox.claim(long)
    assert claimed is not None
    assert await inbox.claim(long) is None  # the same event again: a duplicate
    await asyncio.sleep(0.1)
    (taken,) = await SqlInbox(store).take_over()

    def fields(item):
        return (item.id, item.platform, item.event_key, item.channel, item.thread, item.text, item.trigger,
                item.user, item.reply, item.state, item.parked)

    assert fields(claimed) == fields(taken)
    assert claimed.event_key == "k" * 255 and claimed.text == "a NUL\ufffd here"


async def test_expired_leases_are_taken_over_by_exactly_one_instance(store: SqlStore):
    dead = SqlInbox(store, lease_seconds=0.05)
    for n in range(20):
        await dead.claim(event(n))
    finished = await dead.claim(event(99))
    assert finished is not None
    await dead.finish(finished, "answered")
    await asyncio.sleep(0.1)
    b, c = SqlInbox(store, lease_seconds=30), SqlInbox(store, lease_seconds=30)
    got_b, got_c = await asyncio.gather(b.take_over(limit=100), c.take_over(limit=100))
    ids_b, ids_c = {i.id for i in got_b}, {i.id for i in got_c}
    assert not ids_b & ids_c and len(ids_b | ids_c) == 20  # every open one, once; the answered one never
    assert await SqlInbox(store).take_over() == []


async def test_a_renewed_lease_is_not_taken_over(store: SqlStore):
    alive = SqlInbox(store, lease_seconds=0.3)
    await alive.claim(event(1))
    alive.start_heartbeat()
    try:
        await asyncio.sleep(0.6)
        assert await SqlInbox(store).take_over() == []
    finally:
        await alive.stop_heartbeat()
    await asyncio.sleep(0.4)
    assert len(await SqlInbox(store).take_over()) == 1


async def test_a_renewal_does_not_wait_for_a_row_another_transaction_holds(store: SqlStore):
    """The writer's batch and the renewal both lock many of an instance's rows: a renewal that waited for the
    batch's rows (in an order of its own) ended in PostgreSQL's "deadlock detected" in a burst of a thousand
    events. Now it renews the rows it can lock at once and leaves the held one to the next beat."""
    inbox = SqlInbox(store, lease_seconds=30)
    held, free = await inbox.claim(event(1)), await inbox.claim(event(2))
    assert held is not None and free is not None
    if store.engine.dialect.name != "postgresql":
        return  # SQLite: one writer at a time, no row locks
    leases = "SELECT id, lease_until FROM inbox ORDER BY id"
    before = dict(await store.rows(text(leases), {}))
    async with store.direct.connect() as conn:  # as the writer's batch does, in the middle of its transaction
        await conn.execute(text("SELECT 1 FROM inbox WHERE id = :id FOR UPDATE"), {"id": held.id})
        async with asyncio.timeout(5):  # before: waited for the lock as long as that transaction lasted
            await inbox.renew()
        await conn.rollback()
    after = dict(await store.rows(text(leases), {}))
    assert after[held.id] == before[held.id] and after[free.id] > before[free.id]
