"""`/proc/1/root/...` (another process's root) is refused as a kernel path, decided on the text: resolving it
fails with EACCES for anyone but that process's owner, and that failure must be a denial, not an error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Run as an unprivileged user (as the bot should be): import first, then drop root if we have it.
PROBE = """
import json, os, sys
from bot.engine.errors import ToolDenied
from bot.tools.sandbox import resolve_allowed
if os.getuid() == 0:
    os.setgid(65534)
    os.setuid(65534)
out = {}
for path in sys.argv[2:]:
    try:
        resolve_allowed(path, [sys.argv[1]])
        out[path] = "allowed"
    except ToolDenied as exc:
        out[path] = "denied: " + exc.reason
    except Exception as exc:
        out[path] = f"error: {type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def test_another_process_root_is_denied_not_an_error():
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:  # traversable by the unprivileged user
        os.chmod(tmp, 0o755)
        root = Path(tmp) / "logs"
        root.mkdir(mode=0o755)
        (root / "init_root").symlink_to("/proc/1/root/etc/shadow")
        verdicts = _probe(root)
    assert all(v.startswith("denied: ") for v in verdicts.values()), verdicts
    assert "kernel or device path" in verdicts["/proc/1/root/etc/shadow"]


def _probe(root: Path) -> dict[str, str]:
    paths = ["/proc/1/root/etc/shadow", "/proc/1/cwd/x", str(root / "init_root")]
    run = subprocess.run([sys.executable, "-c", PROBE, str(root), *paths], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)
