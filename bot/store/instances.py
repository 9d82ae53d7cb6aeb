"""Turns of processes that are gone (PostgreSQL): `InstanceLease`.

A turn row names the process that runs it (`turns.owner`, written with the row's write-behind INSERT: no extra
round trip). Each process that runs turns on PostgreSQL (`yokebot run`, `ask`, `chat`, `schedule run`) keeps
an `instances` row alive: queued ahead of its first turn (so no turn of it is ever seen without it), renewed
every third of the lease by one statement, deleted when it stops. `yokebot run` also sweeps, at start and at
every renewal: a `running` turn whose owner is not alive ends stopped by `interrupted` (status `error`, as the
engine records a turn cancelled at shutdown), so `yokebot sessions` and `trace` do not show a killed `ask` or a
cut scheduled turn running forever. Turns an open inbox row points at are left to the inbox's recovery
(bot/chat/core/inbox_turns.py), which knows whether to run them again.

On SQLite nothing of this runs: `yokebot run` holds the file alone and ends every `running` turn at start."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import cast

from sqlalchemy import Table, delete, exists, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from bot.engine.inbox import HELD_STATES
from bot.store.inbox import interrupted_row
from bot.store.models import InboxRow, InstanceRow, TurnRow, utcnow
from bot.store.repositories import SqlStore

log = logging.getLogger(__name__)
INST, T, INBOX = (cast(Table, r.__table__) for r in (InstanceRow, TurnRow, InboxRow))
GONE_NOTE = "the yokebot process running this turn stopped before it finished (killed or crashed)"
FORGET_AFTER = 10  # leases: an instance row this long expired is deleted (its turns were swept long before)

_UPSERT = pg_insert(INST)
_ALIVE = _UPSERT.on_conflict_do_update(index_elements=[INST.c.id], set_={"alive_until": _UPSERT.excluded.alive_until})


class InstanceLease:
    def __init__(self, store: SqlStore, *, lease_seconds: float = 30.0) -> None:
        self.store, self.owner = store, store.owner
        self.lease = timedelta(seconds=lease_seconds)
        self.sweeping = False  # `yokebot run`: also end the turns of dead instances at every renewal
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Announce this process (queued: written before, or with, its first turn row) and keep it alive."""
        now = utcnow()
        self.store.writes.put(_ALIVE, {"id": self.owner, "alive_until": now + self.lease, "started_at": now})
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._beat(), name="yokebot-instance-lease")

    async def stop(self) -> None:
        """This process is done (its turns are recorded): its row goes."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        try:
            await self.store.execute(delete(INST).where(INST.c.id == self.owner), {})
        except Exception as exc:  # the row expires on its own; only the sweep's cleanup is later
            log.info("could not remove this instance's row (%s)", type(exc).__name__)

    async def renew(self) -> None:
        now = utcnow()  # an upsert: a row removed while this process was cut off comes back
        await self.store.execute(_ALIVE, {"id": self.owner, "alive_until": now + self.lease, "started_at": now})

    async def sweep(self, note: str = GONE_NOTE) -> int:
        """End every `running` turn whose process is gone; the number ended."""
        now = utcnow()
        alive = select(INST.c.id).where(INST.c.alive_until >= now)
        in_inbox = exists().where(INBOX.c.turn_id == T.c.id, INBOX.c.state.in_(HELD_STATES))
        stmt = (update(T).where(T.c.status == "running", T.c.owner.is_not(None), T.c.owner != self.owner,
                                T.c.owner.not_in(alive), ~in_inbox)
                .values(interrupted_row(note, now)).returning(T.c.id))
        ended = len(await self.store.rows(stmt, {}, write=True))
        await self.store.execute(delete(INST).where(INST.c.alive_until < now - FORGET_AFTER * self.lease), {})
        if ended:
            log.warning("%d turn(s) were left running by a yokebot process that is gone; they end as interrupted",
                        ended)
        return ended

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.lease.total_seconds() / 3)
            try:
                await self.renew()
                if self.sweeping:
                    await self.sweep()
            except Exception as exc:  # the database is away: renewed when it returns
                log.warning("could not renew this instance's liveness (%s)", type(exc).__name__)
