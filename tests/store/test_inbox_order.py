"""Issue 25, the store's part of a thread's turn order: `earlier_elsewhere` sees the open events of the same
thread accepted earlier by another instance (not later ones, not closed ones, not other threads, not its
own), and closing one wakes the other instances over LISTEN/NOTIFY. SQLite asks nothing."""

from __future__ import annotations

import asyncio

from bot.records.inbox import InboxItem, NewEvent, conversation_digest
from bot.store.inbox import SqlInbox
from bot.store.repositories import SqlStore
from tests.conftest import db_url_via_pgbouncer as db_url  # noqa: F401  (direct, and through PgBouncer)
from tests.helpers import eventually


def event(n: int, thread: str = "T1") -> NewEvent:
    return NewEvent("slack", f"C1:{n}", "C1", thread, f"question {n}", "thread", "U1", {})


async def claim(inbox: SqlInbox, n: int, thread: str = "T1") -> InboxItem:
    item = await inbox.claim(event(n, thread))
    assert item is not None
    return item


async def test_an_earlier_open_event_of_the_thread_elsewhere_holds_a_later_one_back(store: SqlStore):
    a, b = SqlInbox(store), SqlInbox(store, owner="another-instance")
    try:
        first = await claim(a, 1)
        other_thread = await claim(b, 2, thread="T2")
        second = await claim(b, 3)
        third = await claim(a, 4)
        if store.engine.dialect.name == "sqlite":  # one process per file: everything open is in its hands
            assert not await b.earlier_elsewhere(second)
            return
        assert await b.earlier_elsewhere(second)  # a holds the first, accepted before it
        assert not await a.earlier_elsewhere(first)  # nothing before it
        assert not await b.earlier_elsewhere(other_thread)  # another thread
        assert await a.earlier_elsewhere(third)  # b's second is before it; a's own first is a's to order
        heard: list[str] = []
        b.on_closed(heard.append)
        await a.finish(first, "answered")
        await eventually(lambda: conversation_digest("slack", "C1", "T1") in heard, what="the NOTIFY of the close")
        assert not await b.earlier_elsewhere(second)
        await b.finish(second, "answered")
        assert not await a.earlier_elsewhere(third)
    finally:
        await asyncio.gather(a.close(), b.close())
