"""All MCP servers of the loaded profiles: one connection per server name (agents that name a server must
describe it alike), their allowed tools registered in the tool registry whenever the server is up, their
state for `/readyz` and `/metrics`, and start/stop with the app.

At start-up, a connected server that does not offer an allowed tool, or offers it with a schema the model
API would reject, stops the start with one sentence. A server that is down at start-up is not an error: it
is reconnected with backoff, and its tools appear once it is up."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from bot.engine.errors import ConfigError
from bot.engine.run import Tool
from bot.engine.spec import AgentProfile, McpServerSpec, namespaced
from bot.mcp.connection import McpConnection, McpTiming, launch
from bot.mcp.params import ServerParams, resolve
from bot.mcp.schema import schema_problem
from bot.mcp.tools import make_tool

log = logging.getLogger(__name__)


@dataclass
class ServerPlan:
    """One server as the profiles declare it: how to reach it, and which of its tools any agent allows."""

    params: ServerParams
    spec: McpServerSpec
    agents: list[str] = field(default_factory=lambda: list[str]())
    allowed: set[str] = field(default_factory=lambda: set[str]())


def plan_servers(profiles: Mapping[str, AgentProfile], environ: Mapping[str, str]) -> dict[str, ServerPlan]:
    plans: dict[str, ServerPlan] = {}
    for profile in profiles.values():
        for name, spec in profile.mcp.items():
            plan = plans.get(name)
            if plan is None:
                params = resolve(name, spec, profile.path.parent, environ)
                plan = plans[name] = ServerPlan(params, spec)
            elif plan.spec.connection_key() != spec.connection_key() or plan.spec.timeout != spec.timeout:
                raise ConfigError(f"The MCP server {name!r} is declared differently by the agents "
                                  f"{plan.agents[0]} and {profile.name}; describe it alike, or name one differently.")
            plan.agents.append(profile.name)
            plan.allowed |= set(spec.allowed())
    return plans


class McpMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.up = Gauge("yokebot_mcp_server_up", "1 when the MCP server is connected.", ["server"], registry=registry)
        self.connects = Gauge("yokebot_mcp_server_connects", "Successful connections (more than 1: restarted).",
                              ["server"], registry=registry)
        self.tools = Gauge("yokebot_mcp_server_tools", "Allowed tools of the server offered to the model now.",
                           ["server"], registry=registry)


class McpManager:
    def __init__(self, plans: dict[str, ServerPlan], registry: MutableMapping[str, Tool[Any]], timing: McpTiming,
                 metrics: CollectorRegistry | None = None) -> None:
        self.plans, self.registry, self.timing = plans, registry, timing
        self.metrics = McpMetrics(metrics) if metrics is not None and plans else None
        self.connections: dict[str, McpConnection] = {}
        self.problems: dict[str, list[str]] = {}  # server -> refused tools, with why

    @classmethod
    def from_profiles(cls, profiles: Mapping[str, AgentProfile], registry: MutableMapping[str, Tool[Any]],
                      timing: McpTiming, metrics: CollectorRegistry | None = None,
                      environ: Mapping[str, str] | None = None) -> McpManager:
        return cls(plan_servers(profiles, os.environ if environ is None else environ), registry, timing, metrics)

    def secret_values(self) -> list[str]:
        return [s for plan in self.plans.values() for s in plan.params.secrets]

    async def start(self) -> None:
        """Connect every server at once; raise ConfigError for a stdio server that must run isolated where it
        cannot, or a connected server whose allowed tools cannot be offered (after stopping them all)."""
        for plan in self.plans.values():
            if plan.params.transport == "stdio":
                await asyncio.to_thread(launch, plan.params)  # ConfigError: not found, or cannot be isolated
        for name, plan in self.plans.items():
            self.connections[name] = McpConnection(plan.params, self.timing, self._register)
        await asyncio.gather(*(c.start() for c in self.connections.values()))
        problems = [f"MCP server {name!r}: {p}" for name, ps in self.problems.items() for p in ps]
        if problems:
            await self.stop()
            raise ConfigError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
        for conn in self.connections.values():
            if conn.state != "up":
                log.warning("MCP server %s is not reachable at start-up (%s); its tools are offered once it "
                            "is up", conn.name, conn.error)
        self.refresh_metrics()

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.connections.values()))
        self.refresh_metrics()

    def _register(self, conn: McpConnection) -> None:
        """The server is up (or its tool list changed): (re)register the allowed tools it offers."""
        plan = self.plans[conn.name]
        offered = {t.name: t for t in conn.tools}
        problems: list[str] = []
        for remote in sorted(plan.allowed):
            name = namespaced(conn.name, remote)
            tool = offered.get(remote)
            problem = "it offers no such tool" if tool is None else schema_problem(tool.input_schema)
            if tool is None or problem is not None:
                self.registry.pop(name, None)
                known = ", ".join(sorted(offered)) or "none"
                problems.append(f"tool {remote!r} is refused: {problem}" + (
                    f" (it offers: {known})" if tool is None else ""))
                continue
            self.registry[name] = make_tool(conn, tool, plan.spec)
        self.problems[conn.name] = problems
        for p in problems:
            log.error("MCP server %s: %s", conn.name, p)
        self.refresh_metrics()

    def refresh_metrics(self) -> None:
        if self.metrics is None:
            return
        for name, conn in self.connections.items():
            self.metrics.up.labels(server=name).set(1 if conn.state == "up" else 0)
            self.metrics.connects.labels(server=name).set(conn.connects)
            registered = [r for r in self.plans[name].allowed if namespaced(name, r) in self.registry]
            self.metrics.tools.labels(server=name).set(len(registered) if conn.state == "up" else 0)

    def states(self) -> dict[str, dict[str, Any]]:
        """For `/readyz`, which anyone who reaches the port may read: states and counts, never an error's
        text (a server's error may quote what it was sent); the log has the texts. Information only: a
        down MCP server does not make the bot unready."""
        self.refresh_metrics()
        out: dict[str, dict[str, Any]] = {}
        for name, conn in self.connections.items():
            entry: dict[str, Any] = {"state": conn.state, "transport": conn.params.transport,
                                     "connects": conn.connects}
            if self.problems.get(name):
                entry["refused_tools"] = len(self.problems[name])
            out[name] = entry
        return out
