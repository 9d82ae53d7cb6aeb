"""`yokebot doctor`: every program an agent's shell allow-list names exists here (a container image without
`procps` has no `free` or `uptime`; one without systemd has no `journalctl`). Each missing one is reported with
the agent, the tool and the program, where the allow-list would otherwise fail only when the model tries it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import Any

from bot.chat.core.checks import Check, ok, warn


def missing_programs(profiles: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(agent, tool, program) for each allow-listed command whose program is not installed, in order."""
    from bot.tools.commands import SAFE_PATH
    from bot.tools.shell import ShellSettings

    missing: list[tuple[str, str, str]] = []
    for agent, profile in sorted(profiles.items()):
        for tool, settings in profile.tools.items():
            if not isinstance(settings, ShellSettings):
                continue
            for rule in settings.commands:
                program = rule.executable or rule.words[0]
                found = (os.access(program, os.X_OK) if rule.executable
                         else shutil.which(program, path=SAFE_PATH) is not None)
                if not found and (agent, tool, program) not in missing:
                    missing.append((agent, tool, program))
    return missing


def check_programs(profiles: Mapping[str, Any]) -> list[Check]:
    missing = missing_programs(profiles)
    checks = [warn(f"agent {agent}", f"its tool {tool} allows {program}, which is not installed here",
                   f"install the package that has {program} (the Docker image: Dockerfile), or remove the "
                   f"command from {tool}: in {profiles[agent].path}")
              for agent, tool, program in missing]
    if not checks and any(_has_commands(p) for p in profiles.values()):
        checks.append(ok("programs", "every program the agents' shell allow-lists name is installed"))
    return checks


def _has_commands(profile: Any) -> bool:
    from bot.tools.shell import ShellSettings

    return any(isinstance(s, ShellSettings) and s.commands for s in profile.tools.values())
