"""A private PostgreSQL cluster for one test: its own data directory in a temporary directory, its own free
port on 127.0.0.1, trust authentication. A test may stop it (`stop()`: `pg_ctl stop -m fast`, as an operator's
`pg_ctlcluster ... stop`) and start it again, which the shared server at 5432 must never be.

PostgreSQL refuses to run as root; when the tests run as root (CI, this machine), `initdb` and `pg_ctl` run as
the `postgres` user (`runuser -u postgres --`) in a directory it owns."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from glob import glob
from pathlib import Path

import pytest

from tests.helpers import free_port

REQUIRE_PG = os.environ.get("YOKEBOT_REQUIRE_PG") == "1"
PG_USER = "postgres"


def _bin_dir() -> Path | None:
    """The newest installed server's binaries (/usr/lib/postgresql/<version>/bin), or those on the PATH."""
    found = sorted(glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3].split(".")[0]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path and shutil.which("initdb") else None


def _unavailable(reason: str) -> None:
    if REQUIRE_PG:
        pytest.fail(f"a private PostgreSQL cluster is required (YOKEBOT_REQUIRE_PG=1) but {reason}")
    pytest.skip(reason)


class PgCluster:
    """`start()` the first time runs initdb; `url` is the SQLAlchemy URL of its `postgres` database."""

    def __init__(self) -> None:
        bin_dir = _bin_dir()
        if bin_dir is None:
            _unavailable("the PostgreSQL server binaries (initdb, pg_ctl) are not installed")
        assert bin_dir is not None
        self._bin = bin_dir
        self._as: list[str] = []
        self._owner: tuple[int, int] | None = None
        if os.geteuid() == 0:
            try:
                entry = pwd.getpwnam(PG_USER)
            except KeyError:
                _unavailable(f"tests run as root and there is no {PG_USER!r} user to run PostgreSQL as")
                raise
            if shutil.which("runuser") is None:
                _unavailable("tests run as root and `runuser` is missing")
            self._as = ["runuser", "-u", PG_USER, "--"]
            self._owner = (entry.pw_uid, entry.pw_gid)
        self.root = Path(tempfile.mkdtemp(prefix="yokebot-pg-"))
        if self._owner is not None:
            os.chown(self.root, *self._owner)
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = 0
        self._initialised = False

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://{PG_USER}@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, timeout: float = 60) -> None:
        done = subprocess.run([*self._as, str(self._bin / args[0]), *args[1:]], capture_output=True, text=True,
                              timeout=timeout, cwd=self.root, check=False)
        if done.returncode != 0:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stderr.strip()}\n{tail}")

    def start(self) -> PgCluster:
        if not self._initialised:
            self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", PG_USER, "--no-sync",
                      "-E", "UTF8", "--locale=C.UTF-8")
            self._initialised = True
            for _attempt in range(5):  # a free port can be taken by someone else before the server binds it
                self.port = free_port()
                try:
                    self._pg_ctl_start()
                    return self
                except RuntimeError:
                    if "could not bind" not in (self.log.read_text() if self.log.exists() else ""):
                        raise
            raise RuntimeError("no free port for the private PostgreSQL cluster")
        self._pg_ctl_start()
        return self

    def _pg_ctl_start(self) -> None:
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.root} "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=16MB "
                   "-c max_connections=60")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast", *, wait: bool = True) -> None:
        """`pg_ctl stop -m fast`: every session is ended (their clients read 'terminating connection due to
        administrator command'), then the server exits; until `start()`, connections are refused. `-m smart`
        (with `wait=False`): the server waits for its sessions to end, refusing new ones meanwhile with 'the
        database system is shutting down'; `wait_stopped()` waits for it to exit."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w" if wait else "-W", "-t", "60", "stop")

    def wait_stopped(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while (self.data / "postmaster.pid").exists():
            if time.monotonic() > deadline:
                raise TimeoutError("the private PostgreSQL cluster did not stop")
            time.sleep(0.05)

    def close(self) -> None:
        if self._initialised and (self.data / "postmaster.pid").exists():
            subprocess.run([*self._as, str(self._bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w",
                            "stop"], capture_output=True, timeout=60, check=False, cwd=self.root)
        shutil.rmtree(self.root, ignore_errors=True)
