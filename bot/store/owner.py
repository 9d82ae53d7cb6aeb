"""Who a process is, for the rows it holds: its inbox leases, the turns it runs, its `instances` row; and, on
Linux, enough to tell later that it is gone (`Liveness`): a restarted `yokebot run` on the same host then
takes over what its killed predecessor held at once, without waiting its leases out (bot/store/instances.py)."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


def host_name() -> str:
    return socket.gethostname()[:80]


def instance_id() -> str:
    """Host, pid and a random part (a restarted process with the same pid is someone else)."""
    return f"{host_name()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, slots=True)
class Liveness:
    """Where a process runs and which one it is: the host, the kernel's boot (/proc/sys/kernel/random/boot_id),
    the pid namespace (two containers on one host may share its name and its boot, never a pid namespace),
    the pid, and the process's start time (clock ticks after boot: a pid used again is another process)."""

    host: str
    boot_id: str
    pid_ns: str
    pid: int
    started: int

    def gone(self, here: Liveness) -> bool:
        """Known, from `here` (this process), to have ended: recorded on this host in this boot and pid
        namespace, and no process with that pid started at that time runs now. False when it cannot be told
        (another host or container, an older record): then its leases are waited out."""
        if (self.host, self.boot_id, self.pid_ns) != (here.host, here.boot_id, here.pid_ns) or not self.boot_id:
            return False
        if self.pid == here.pid:
            return self.started != here.started
        found = _stat(self.pid)
        if found is None:
            try:
                os.kill(self.pid, 0)  # hidden from this user's /proc (hidepid) but there: cannot be told
            except ProcessLookupError:
                return True
            except OSError:
                return False
            return False
        state, started = found
        return state in ("Z", "X") or started != self.started  # a zombie has ended; another start: another one


def _stat(pid: int) -> tuple[str, int] | None:
    """The state and the start time (ticks after boot) of a process, from /proc/<pid>/stat; None: no such
    process (or none this user may see)."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()  # after the command name, which may hold spaces and parentheses
    return fields[0], int(fields[19])  # field 3 (state) and field 22 (starttime) of proc(5)


def this_process() -> Liveness | None:
    """This process's `Liveness`; None where /proc does not tell (not Linux): its leases are waited out."""
    try:
        boot_id = (PROC / "sys/kernel/random/boot_id").read_text().strip()
        pid_ns = os.readlink(PROC / "self/ns/pid")
    except OSError:
        return None
    found = _stat(os.getpid())
    if found is None:
        return None
    return Liveness(host_name(), boot_id[:64], pid_ns[:64], os.getpid(), found[1])
