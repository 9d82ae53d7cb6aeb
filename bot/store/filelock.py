"""One `yokebot run` per SQLite file: an exclusive `flock` on `<database>.run.lock`, held while it runs.

SQLite is a file, not a server: two bots on one file would each think they own every unfinished turn (and
answer it twice after a restart), and a per-session lock in one process does not reach the other. The
operating system drops the lock when the process dies, kill -9 included, so a stale lock cannot block a
restart. `yokebot ask`/`chat`/`sessions` do not take it."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from sqlalchemy.engine import make_url

from bot.engine.errors import ConfigError


def sqlite_file(url: str) -> Path | None:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).expanduser().resolve()


class RunLock:
    def __init__(self, database: Path) -> None:
        self.database = database
        self.path = database.with_name(database.name + ".run.lock")
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")  # held open for the life of the process
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise ConfigError(
                f"Another `yokebot run` ({holder}) is already using the SQLite database {self.database}"
                "; SQLite allows one running bot per file: stop that one first, or use PostgreSQL to run "
                "several (docs/scale-out.md)."
            ) from None
        handle.truncate(0)
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def lock_sqlite_for_run(url: str) -> RunLock | None:
    """Take the run lock when the database is a SQLite file; None for PostgreSQL (or in-memory SQLite)."""
    database = sqlite_file(url)
    if database is None:
        return None
    lock = RunLock(database)
    lock.acquire()
    return lock
