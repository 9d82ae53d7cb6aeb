"""The agents that come with yokebot (ops, logs, metrics, host, reporter): the checkout's agents/ folder, which
`agents` here links to, so that a wheel (`pip install .`, `pipx install .`) carries them as package data. A
process started where there is no ./agents folder, without YOKEBOT_AGENTS_DIR, uses these (bot/config.py)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def shipped_agents() -> Path | None:
    """Where the shipped agents are on this machine (the installed package's copy, or the checkout's agents/ through
    the link); None when they are missing (a build that left them out)."""
    found = Path(str(resources.files(__name__).joinpath("agents")))
    return found if (found / "ops" / "AGENT.md").is_file() else None
