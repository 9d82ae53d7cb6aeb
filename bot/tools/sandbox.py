"""The allow-list sandbox. Default: deny. Paths are resolved (symlinks followed) before they are checked."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from bot.engine.errors import ToolDenied

MAX_PATH_CHARS = 1024


def resolve_allowed(path: str, roots: Sequence[str]) -> Path:
    """Return the real path of `path` if it lies under one of `roots` (after resolving both), else deny."""
    allowed = ", ".join(roots) if roots else "no paths (this agent's profile allows none)"
    if not roots:
        raise ToolDenied("this tool has no allowed paths", allowed)
    if "\x00" in path:
        raise ToolDenied("the path contains a NUL byte", allowed)
    if len(path) > MAX_PATH_CHARS:
        raise ToolDenied(f"the path is longer than {MAX_PATH_CHARS} characters", allowed)
    if not os.path.isabs(path):
        raise ToolDenied(f"{path!r} is not an absolute path", allowed)
    real = os.path.realpath(path)
    for root in roots:
        real_root = os.path.realpath(root)
        if real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep):
            return Path(real)
    raise ToolDenied(f"{path} is outside the allowed paths", allowed)
