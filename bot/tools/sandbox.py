"""The allow-list sandbox for file paths. Default: deny.

A path is checked as text first (NUL and control bytes, look-alike characters, `..`, length), then resolved
with `realpath` (symlinks followed) and must lie under one of the allowed roots. Files are opened with
O_NOFOLLOW and re-checked through the open descriptor, so a symlink swapped in after the check is caught."""

from __future__ import annotations

import os
import stat
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from bot.engine.errors import ToolDenied, ToolFailed

MAX_PATH_CHARS = 1024
MAX_NAME_CHARS = 255
# Kernel views of processes and devices: never readable through a root elsewhere.
SPECIAL_TREES = ("/proc", "/sys", "/dev")


def describe_roots(roots: Sequence[str]) -> str:
    if not roots:
        return "no paths (this agent's profile allows none for this tool)"
    return "files under " + ", ".join(roots)


def suspicious_char(text: str) -> str | None:
    """Name the first character a command or path must not contain, if any."""
    for ch in text:
        cat = unicodedata.category(ch)
        if ch == "\x00":
            return "a NUL byte"
        if cat == "Cc" and ch != "\t":
            return f"a control character (U+{ord(ch):04X})"
        if cat in ("Cf", "Co", "Cs", "Zl", "Zp"):
            return f"an invisible or formatting character (U+{ord(ch):04X})"
        if not ch.isascii() and unicodedata.normalize("NFKC", ch) != ch:
            return f"a look-alike character {ch!r} (U+{ord(ch):04X})"
    return None


def _under(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _check_text(path: str, allowed: str) -> None:
    if not path:
        raise ToolDenied("the path is empty", allowed)
    if len(path) > MAX_PATH_CHARS:
        raise ToolDenied(f"the path is longer than {MAX_PATH_CHARS} characters", allowed)
    bad = suspicious_char(path)
    if bad:
        raise ToolDenied(f"the path contains {bad}", allowed)
    if not os.path.isabs(path):
        raise ToolDenied(f"{path!r} is not an absolute path", allowed)
    parts = path.split(os.sep)
    if ".." in parts:
        raise ToolDenied("the path contains a '..' component", allowed)
    if any(len(p) > MAX_NAME_CHARS for p in parts):
        raise ToolDenied(f"a path component is longer than {MAX_NAME_CHARS} characters", allowed)


def resolve_allowed(path: str, roots: Sequence[str]) -> Path:
    """Return the real path of `path` if it lies under one of `roots` (after resolving both), else deny."""
    allowed = describe_roots(roots)
    if not roots:
        raise ToolDenied("this tool has no allowed paths", allowed)
    _check_text(path, allowed)
    real_roots = [os.path.realpath(r) for r in roots]
    special_roots = [r for r in real_roots if any(_under(r, t) for t in SPECIAL_TREES)]
    kernel = ToolDenied(f"{path} is a kernel or device path (/proc, /sys, /dev)", allowed)
    if not special_roots and any(_under(path, t) for t in SPECIAL_TREES):
        raise kernel  # decided on the text: realpath of /proc/1/root/... may itself fail (EACCES)
    try:
        real = os.path.realpath(path, strict=False)
    except OSError as exc:  # a link it may not read, a loop: nothing under a root is like that
        raise ToolDenied(f"{path} cannot be resolved ({exc.strerror or exc})", allowed) from None
    if any(_under(path, t) or _under(real, t) for t in SPECIAL_TREES):
        if not any(_under(real, r) for r in special_roots):
            raise kernel
    for root in real_roots:
        if _under(real, root):
            return Path(real)
    if real != os.path.normpath(path):
        raise ToolDenied(f"{path} leads (through a symlink) to {real}, outside the allowed paths", allowed)
    raise ToolDenied(f"{path} is outside the allowed paths", allowed)


def in_roots(real: str, roots: Sequence[str]) -> bool:
    return any(_under(real, os.path.realpath(r)) for r in roots)


def open_allowed(real: Path, roots: Sequence[str]) -> int:
    """Open a path `resolve_allowed` returned, read-only, without following a (newly swapped-in) symlink,
    without blocking on a FIFO; refuse anything but a regular file. Blocking: call it in a thread."""
    allowed = describe_roots(roots)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(real, flags)
    except FileNotFoundError:
        raise ToolFailed(f"{real} does not exist (allowed: {allowed})") from None
    except OSError as exc:
        raise ToolDenied(f"{real} cannot be opened safely ({exc.strerror})", allowed) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ToolDenied(f"{real} is not a regular file", allowed)
        if st.st_nlink > 1:
            raise ToolDenied(
                f"{real} has several hard links, so where it really lives cannot be checked", allowed
            )
        actual = _fd_path(fd)
        if actual is not None and not in_roots(actual, roots):
            raise ToolDenied(f"{real} changed while it was being opened and now points outside", allowed)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
