"""Issue 25: an instance records which process it is (host, boot id, pid namespace, pid, start time), so that
another one on the same host can tell it is gone and take what it held at once, and never mistakes a live
process, a reused pid's new owner or an instance on another host for a dead one."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator

import pytest
from sqlalchemy import text

from bot.records.inbox import NewEvent
from bot.store.db import create_engine, ensure_schema
from bot.store.inbox import SqlInbox
from bot.store.instances import InstanceLease
from bot.store.owner import Liveness, _stat, this_process
from bot.store.repositories import SqlStore

pytestmark = pytest.mark.skipif(this_process() is None, reason="no /proc: liveness cannot be told here")


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def liveness_of(proc: subprocess.Popen[bytes]) -> Liveness:
    here = this_process()
    found = _stat(proc.pid)
    assert here is not None and found is not None
    return dataclasses.replace(here, pid=proc.pid, started=found[1])


def test_a_live_process_is_not_gone_a_killed_one_is_even_before_it_is_reaped(child: subprocess.Popen[bytes]):
    here = this_process()
    assert here is not None
    other = liveness_of(child)
    assert not other.gone(here)
    assert not here.gone(here)
    child.send_signal(signal.SIGKILL)
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped yet: a zombie
    assert other.gone(here)
    child.wait()
    assert other.gone(here)


def test_a_reused_pid_another_host_another_container_or_an_old_record_is_not_taken_for_dead(
        child: subprocess.Popen[bytes]):
    here = this_process()
    assert here is not None
    other = liveness_of(child)
    assert dataclasses.replace(other, started=other.started - 1).gone(here)  # the pid is someone else's now
    assert dataclasses.replace(here, started=here.started - 1).gone(here)  # a predecessor that had our pid
    child.kill()
    child.wait()
    for elsewhere in (dataclasses.replace(other, host="another-host"), dataclasses.replace(other, pid_ns="pid:[1]"),
                      dataclasses.replace(other, boot_id="a-boot-before"), dataclasses.replace(other, boot_id="")):
        assert not elsewhere.gone(here)  # cannot be told from here: its lease is waited out


@pytest.fixture
async def store(pg_database: str) -> AsyncIterator[SqlStore]:
    engine = create_engine(pg_database)
    await ensure_schema(engine)
    store = SqlStore(engine)
    yield store
    await store.close()
    await engine.dispose()


async def test_the_inbox_rows_of_a_killed_instance_on_this_host_are_taken_over_without_waiting_its_lease(
        store: SqlStore, child: subprocess.Popen[bytes]):
    killed, live, remote = (SqlStore(store.engine) for _ in range(3))  # three other instances' names
    rows = {killed.owner: liveness_of(child), live.owner: this_process(),
            remote.owner: dataclasses.replace(liveness_of(child), host="another-host")}
    for owner, p in rows.items():
        assert p is not None
        await store.execute(text("INSERT INTO instances (id, alive_until, started_at, host, boot_id, pid_ns, pid, "
                                 "pid_started) VALUES (:id, now() + interval '1 hour', now(), :host, :boot, :ns, "
                                 ":pid, :started)"),
                            {"id": owner, "host": p.host, "boot": p.boot_id, "ns": p.pid_ns, "pid": p.pid,
                             "started": p.started})
    for n, owner in enumerate(rows):  # each holds an event, leased for an hour
        await SqlInbox(store, lease_seconds=3600, owner=owner).claim(
            NewEvent("slack", f"C1:{n}", "C1", f"{n}.0", f"question {n}", "mention", "U1", {}))
    lease = InstanceLease(store)
    assert await lease.gone_here() == ()  # the child still runs
    child.kill()
    child.wait()
    gone = await lease.gone_here()
    assert gone == (killed.owner,)  # not the live one, nor the one on another host
    mine = SqlInbox(store, owner=lease.owner)
    assert await mine.take_over() == []  # every lease is an hour long
    [taken] = await mine.take_over(owners=gone)
    assert taken.text == "question 0"
    await lease.forget(gone)
    left = await store.rows(text("SELECT id FROM instances ORDER BY id"), {})
    assert sorted(r.id for r in left) == sorted([live.owner, remote.owner])
    for s in (killed, live, remote):
        await s.close()
