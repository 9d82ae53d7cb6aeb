"""From a profile's server spec to what a connection needs: `${VAR}` references resolved from the
environment (a missing variable is a start-up error), a relative `cwd` taken from the agent's folder,
and the resolved secret values listed so the redactor can keep them out of results and audit rows."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bot.engine.errors import ConfigError
from bot.engine.spec import ENV_REF_RE, McpServerSpec
from bot.redact import PATTERNS_ONLY


@dataclass(frozen=True)
class ServerParams:
    name: str
    transport: str  # stdio | http
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    secrets: tuple[str, ...] = ()  # values taken from the environment: redacted wherever they appear
    isolation: str = "required"  # stdio: required | preferred (bot/tools/isolation.py)
    network: bool = True
    read: tuple[str, ...] = ()  # absolute paths
    write: tuple[str, ...] = ()

    def where(self) -> str:
        """For messages and `/readyz`: the command or URL, never a header or an environment value, and a key in
        the URL's query or an argument (`?api_key=…`, `--token …`) redacted (`yokebot doctor`'s output is pasted
        into issues)."""
        shown = f"{self.command} {' '.join(self.args)}".strip() if self.transport == "stdio" else str(self.url)
        return PATTERNS_ONLY(shown)


def _expand(text: str, what: str, environ: Mapping[str, str], used: list[str]) -> str:
    def value(match: re.Match[str]) -> str:
        var = match.group(1)
        if var not in environ:
            raise ConfigError(f"{what} needs the environment variable {var}, which is not set.")
        used.append(environ[var])
        return environ[var]

    return ENV_REF_RE.sub(value, text)


def resolve(name: str, spec: McpServerSpec, agent_dir: Path, environ: Mapping[str, str]) -> ServerParams:
    used: list[str] = []
    label = f"MCP server {name!r}"
    env = {k: _expand(v, f"{label} (env {k})", environ, used) for k, v in spec.env.items()}
    headers = {k: _expand(v, f"{label} (header {k})", environ, used) for k, v in spec.headers.items()}
    cwd = None
    if spec.command is not None:
        cwd = str((agent_dir / (spec.cwd or ".")).resolve())
    return ServerParams(
        name=name, transport=spec.transport, command=spec.command, args=spec.args, env=env, cwd=cwd,
        url=spec.url, headers=headers, secrets=tuple(v for v in used if len(v) >= 6),
        isolation=spec.isolation, network=spec.network,
        read=tuple(str((agent_dir / Path(p).expanduser()).resolve()) for p in spec.read),
        write=tuple(str((agent_dir / Path(p).expanduser()).resolve()) for p in spec.write),
    )
