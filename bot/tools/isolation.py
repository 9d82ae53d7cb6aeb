"""Where `shell` commands run: inside bubblewrap (`bwrap`), an OS sandbox, when it works on this host.

The checks in commands.py look at words and resolve paths; the program then opens those paths itself, so a
directory swapped for a symlink between the check and the open could lead outside (a race). Inside the
sandbox nothing outside can be reached at all: the filesystem holds only the allowed roots (read-only),
what programs need to run (/usr and the loader's files, read-only), a private /tmp and /proc, and nothing
else; no network, a new PID namespace, no capabilities, a clean environment, and it dies with us.

Whether bwrap works is probed once per process (user namespaces may be disabled, or a container's seccomp
profile may refuse them). Where it does not, the profile's `isolation` decides: `required` refuses shell,
`preferred` runs with the path checks alone. `yokebot run` and `yokebot agents show` say which holds."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Isolation = Literal["required", "preferred"]
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What a dynamically linked program needs to start, read-only. /etc/passwd and /etc/group hold no secrets
# (the hashes are in /etc/shadow, which is never there) and let `ls -l` show names instead of numbers.
SYSTEM_DIRS = ("/usr",)
TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/passwd",
                "/etc/group", "/etc/nsswitch.conf")


@dataclass(frozen=True, slots=True)
class Availability:
    available: bool
    detail: str  # "bubblewrap 0.8.0" or why not

    def describe(self, mode: Isolation) -> str:
        if self.available:
            return f"shell commands run isolated ({self.detail}: read-only roots, no network, own /tmp and PIDs)"
        if mode == "required":
            return f"shell is REFUSED: isolation is required but not available ({self.detail})"
        return f"shell runs WITHOUT isolation, with path checks only ({self.detail})"


def _system_args() -> list[str]:
    args: list[str] = []
    for d in SYSTEM_DIRS:
        args += ["--ro-bind", d, d]
    for top in TOP_LINKS:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for f in SYSTEM_FILES:
        args += ["--ro-bind-try", f, f]
    return args


def sandboxed(
    bwrap: str, argv: Sequence[str], roots: Sequence[str], cwd: str, env: Mapping[str, str],
    binds: Sequence[str] = (),
) -> list[str]:
    """The bwrap command line that runs `argv` with only `roots` (and `binds`) visible, read-only."""
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL", "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    args += _system_args()
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]  # noqa: S108 (a fresh, private /tmp)
    exe = argv[0]
    if not exe.startswith(("/usr/", "/bin/", "/sbin/")):
        args += ["--ro-bind-try", exe, exe]  # a rule's own `executable:`
    for path in [*roots, *binds]:
        real = os.path.realpath(path)
        if os.path.exists(real):
            args += ["--ro-bind", real, real]  # after /tmp: a root under /tmp is still seen
    args += ["--chdir", cwd, "--", *argv]
    return args


# What a program that talks to the network needs (names, certificates), read-only.
NETWORK_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/gai.conf", "/etc/ssl", "/etc/ca-certificates",
                 "/etc/pki", "/etc/alternatives")


def installation(command: str) -> list[str]:
    """The folders a command outside /usr needs to run, read-only: the folder its resolved file was installed
    in (`/opt/node-20` for `/opt/node-20/bin/node`, the pyenv prefix of a venv's python), and the virtualenv
    the command sits in (its site-packages)."""
    found: list[str] = []
    real = os.path.realpath(command)
    if not real.startswith(("/usr/", "/bin/", "/sbin/")):
        found.append(os.path.dirname(os.path.dirname(real)))
    venv = os.path.dirname(os.path.dirname(os.path.abspath(command)))
    if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):
        found.append(venv)
    return found


def server_sandbox(
    bwrap: str, argv: Sequence[str], cwd: str, read: Sequence[str], write: Sequence[str], network: bool,
) -> list[str]:
    """The bwrap command line for a long-running server (an MCP stdio server): its own PID namespace and
    /proc (no other process of ours is visible, so neither yokebot's environment nor its memory), no
    capabilities, a private /tmp, the system read-only, its command's installation and `cwd` and `read`
    read-only, `write` read-write, the network only if `network`. The environment is the bwrap process's
    own (so values never appear on a command line that `ps` shows)."""
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
    if network:
        args.append("--share-net")
    args += _system_args()
    for f in NETWORK_FILES if network else ("/etc/alternatives",):
        args += ["--ro-bind-try", f, f]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]  # noqa: S108 (a fresh, private /tmp)
    bound: list[str] = []

    def bind(flag: str, path: str) -> None:
        for name in dict.fromkeys([os.path.realpath(path), os.path.abspath(path)]):  # file, and the name used
            if name == "/" or not os.path.exists(name) or any(name == b or name.startswith(b + "/") for b in bound):
                continue
            args.extend([flag, name, name])
            bound.append(name)

    for path in [*installation(argv[0]), argv[0], cwd, *read]:
        bind("--ro-bind", path)
    bound.clear()  # a writable folder may lie under a read-only one: bwrap mounts it over
    for path in write:
        bind("--bind", path)
    args += ["--chdir", cwd, "--", *argv]
    return args


@functools.cache
def probe() -> Availability:
    """Can bwrap make a sandbox here? Runs `true` in exactly the sandbox commands get (once per process)."""
    bwrap = shutil.which("bwrap", path=SAFE_PATH)
    true = shutil.which("true", path=SAFE_PATH)
    if bwrap is None or true is None:
        return Availability(False, "bubblewrap is not installed (apt-get install bubblewrap)")
    try:
        run = subprocess.run(sandboxed(bwrap, [true], [], "/", {"PATH": SAFE_PATH}), capture_output=True,
                             text=True, timeout=10, stdin=subprocess.DEVNULL)
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return Availability(False, f"bwrap could not be run: {exc}")
    if run.returncode != 0:
        why = (run.stderr.strip().splitlines() or [f"exit code {run.returncode}"])[-1]
        return Availability(False, f"bwrap cannot create a sandbox on this host: {why}")
    return Availability(True, version.strip() or "bubblewrap")


def bwrap_path() -> str | None:
    return shutil.which("bwrap", path=SAFE_PATH) if probe().available else None


PR_SET_DUMPABLE = 4


def not_dumpable() -> bool:
    """Make this process unreadable through /proc by other processes of the same user (its environment,
    memory, file descriptors) and refuse ptrace, gdb and core dumps: prctl(PR_SET_DUMPABLE, 0). Root and
    holders of CAP_SYS_PTRACE still can. False where the OS has no prctl (not Linux)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name or sys.platform != "linux":  # Linux only
        return False
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        return libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
