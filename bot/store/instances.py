"""Turns of processes that are gone (PostgreSQL): `InstanceLease`.

A turn row names the process that runs it (`turns.owner`, written with the row's write-behind INSERT: no extra
round trip). Each process that runs turns on PostgreSQL (`yokebot run`, `ask`, `chat`, `schedule run`) keeps
an `instances` row alive: queued ahead of its first turn (so no turn of it is ever seen without it), renewed
every third of the lease by one statement, deleted when it stops. `yokebot run` also sweeps, at start and at
every renewal: a `running` turn whose owner is not alive ends stopped by `interrupted` (status `error`, as the
engine records a turn cancelled at shutdown), so `yokebot sessions` and `trace` do not show a killed `ask` or a
cut scheduled turn running forever. Turns an open inbox row points at are left to the inbox's recovery
(bot/chat/core/inbox_turns.py), which knows whether to run them again.

The row also says which process it is (host, boot id, pid namespace, pid, start time: `Liveness`,
bot/store/owner.py). `gone_here` finds the instances of this host whose process has ended (killed, crashed):
`yokebot run` takes over their inbox rows at once (bot/chat/core/inbox_turns.py `Recovery`), then `forget`
removes their rows, so that their other turns are swept without waiting for `alive_until`. An instance on another
host (or in another container) cannot be told dead this way: its lease is waited out.

On SQLite nothing of this runs: `yokebot run` holds the file alone and ends every `running` turn at start."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Table, delete, exists, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from bot.records.inbox import HELD_STATES
from bot.store.inbox import interrupted_row
from bot.store.models import InboxRow, InstanceRow, TurnRow, utcnow
from bot.store.owner import Liveness, this_process
from bot.store.repositories import SqlStore

log = logging.getLogger(__name__)
INST, T, INBOX = (cast(Table, r.__table__) for r in (InstanceRow, TurnRow, InboxRow))
GONE_NOTE = "the yokebot process running this turn stopped before it finished (killed or crashed)"
FORGET_AFTER = 10  # leases: an instance row this long expired is deleted (its turns were swept long before)

_UPSERT = pg_insert(INST)
_ALIVE = _UPSERT.on_conflict_do_update(index_elements=[INST.c.id], set_={"alive_until": _UPSERT.excluded.alive_until})


class InstanceLease:
    def __init__(self, store: SqlStore, *, lease_seconds: float = 30.0, sweeping: bool = False) -> None:
        self.store, self.owner = store, store.owner
        self.lease = timedelta(seconds=lease_seconds)
        self.sweeping = sweeping  # `yokebot run`: also end the turns of dead instances at every renewal
        self.process = this_process()
        self._task: asyncio.Task[None] | None = None

    def _row(self, now: datetime) -> dict[str, Any]:
        p = self.process
        return {"id": self.owner, "alive_until": now + self.lease, "started_at": now,
                "host": p.host if p else None, "boot_id": p.boot_id if p else None,
                "pid_ns": p.pid_ns if p else None, "pid": p.pid if p else None,
                "pid_started": p.started if p else None}

    def start(self) -> None:
        """Announce this process (queued: written before, or with, its first turn row) and keep it alive."""
        self.store.writes.put(_ALIVE, self._row(utcnow()))
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
        # an upsert: a row removed while this process was cut off comes back
        await self.store.execute(_ALIVE, self._row(utcnow()))

    async def gone_here(self) -> tuple[str, ...]:
        """The instances of this host whose process has ended (their ids). Empty where this process cannot tell
        (not Linux)."""
        here = self.process
        if here is None:
            return ()
        rows = await self.store.rows(select(INST.c.id, INST.c.boot_id, INST.c.pid_ns, INST.c.pid, INST.c.pid_started)
                                     .where(INST.c.host == here.host, INST.c.id != self.owner,
                                            INST.c.pid.is_not(None)), {})
        gone = tuple(r.id for r in rows if Liveness(here.host, r.boot_id or "", r.pid_ns or "", r.pid,
                                                    r.pid_started or 0).gone(here))
        if gone:
            log.warning("yokebot process(es) %s on this host are gone (killed or crashed): what they held is "
                        "taken over now", ", ".join(gone))
        return gone

    async def forget(self, owners: tuple[str, ...]) -> None:
        """Remove the rows of instances known to be gone, and end the turns they left running now."""
        await self.store.execute(delete(INST).where(INST.c.id.in_(list(owners))), {})
        await self.sweep()

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
