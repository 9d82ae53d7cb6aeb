"""Who a process is, for the rows it holds: its inbox leases, the turns it runs, its `instances` row."""

from __future__ import annotations

import os
import socket
import uuid


def instance_id() -> str:
    """Host, pid and a random part (a restarted process with the same pid is someone else)."""
    return f"{socket.gethostname()[:80]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
