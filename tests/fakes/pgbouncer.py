"""A real PgBouncer (Debian's `pgbouncer`) for the tests, on a free port of 127.0.0.1, in front of a PostgreSQL
server (the machine's at 5432, or a private cluster): its own ini, userlist, log and pid file in a temporary
directory, `auth_type = trust`, every database name passed through (`* = host=… port=…`). `pool_mode` is
`transaction` (how most managed offerings and many clusters put a pooler in front) or `session`.

PgBouncer will not run as root; when the tests do (CI, this machine), it runs as the `postgres` user in a
directory that user owns. `PgBouncer.url(database)` is the SQLAlchemy URL of a database through it."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Literal

import pytest

from tests.helpers import free_port

REQUIRE_PGBOUNCER = os.environ.get("YOKEBOT_REQUIRE_PG") == "1"
PoolMode = Literal["transaction", "session"]


class PooledUrl(str):
    """A database URL through a pooler that also knows the direct URL of the same database (what
    YOKEBOT_DATABASE_DIRECT_URL is set to). Everything that takes a URL string takes it."""

    direct: str

    def __new__(cls, url: str, direct: str) -> PooledUrl:
        made = super().__new__(cls, url)
        made.direct = direct
        return made


def direct_of(url: str) -> str | None:
    """The direct URL that goes with `url` when it goes through a pooler; None for a direct one."""
    return url.direct if isinstance(url, PooledUrl) else None


class PgBouncer:
    def __init__(self, mode: PoolMode, *, server_port: int = 5432, user: str = "postgres") -> None:
        binary = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None)
        if binary is None:
            if REQUIRE_PGBOUNCER:
                pytest.fail("PgBouncer is required with YOKEBOT_REQUIRE_PG=1 but is not installed "
                            "(apt-get install pgbouncer; .ci/run does)")
            pytest.skip("PgBouncer is not installed (apt-get install pgbouncer)")
        self.binary, self.mode, self.server_port, self.user = binary, mode, server_port, user
        self.root = Path(tempfile.mkdtemp(prefix=f"yokebot-pgbouncer-{mode}-"))
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._as: list[str] = []
        if os.geteuid() == 0:
            entry = pwd.getpwnam(user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            self._as = ["-u", user]  # PgBouncer switches to that user itself (signals reach it, not a wrapper)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+asyncpg://{self.user}@127.0.0.1:{self.port}/{database}"

    def _write_config(self) -> Path:
        ini = self.root / "pgbouncer.ini"
        (self.root / "userlist.txt").write_text(f'"{self.user}" ""\n')
        ini.write_text("\n".join([
            "[databases]",
            f"* = host=127.0.0.1 port={self.server_port}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {self.port}",
            "unix_socket_dir =",
            "auth_type = trust",
            f"auth_file = {self.root / 'userlist.txt'}",
            f"pool_mode = {self.mode}",
            "default_pool_size = 20",
            "max_client_conn = 500",
            "ignore_startup_parameters = extra_float_digits",
            f"logfile = {self.root / 'pgbouncer.log'}",
            f"pidfile = {self.root / 'pgbouncer.pid'}",
            "",
        ]))
        if self._as:
            entry = pwd.getpwnam(self.user)
            for path in self.root.iterdir():
                os.chown(path, entry.pw_uid, entry.pw_gid)
        return ini

    def start(self) -> PgBouncer:
        for _attempt in range(5):  # a free port can be taken before PgBouncer binds it
            self.port = free_port()
            ini = self._write_config()
            self._proc = subprocess.Popen([self.binary, *self._as, str(ini)], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, cwd=self.root)
            if self._listening(10.0):
                return self
            self.stop()
        raise RuntimeError(f"PgBouncer did not start: {self.log()[-2000:]}")

    def _listening(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return True
            except OSError:
                time.sleep(0.05)
        return False

    def log(self) -> str:
        path = self.root / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)  # 1.18: immediate shutdown (SIGINT waits for its clients)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
