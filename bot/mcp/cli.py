"""`yokebot mcp tools AGENT SERVER`: connect to one declared server and list what it offers, allowed or not,
with the name the model would see and whether its schema would be accepted, before you allow a tool."""

from __future__ import annotations

import asyncio
import json
import os
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from bot.chat.console.view import Terminal
from bot.engine.errors import ConfigError, YokebotError
from bot.redact import printable

if TYPE_CHECKING:  # loaded when the command runs: `yokebot --help` stays quick
    from bot.config import Settings

mcp_app = typer.Typer(help="MCP servers declared in agent profiles (the `mcp:` section of AGENT.md).",
                      no_args_is_help=True)
out = Terminal()  # the terminal's one gate: server-given names and descriptions are untrusted
err = Terminal(stderr=True)


async def offered_tools(settings: Settings, agent: str, server: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Every tool the server offers, and the allowed tools it does not offer."""
    from bot.chat.platforms import is_id
    from bot.engine.spec import ProfileLoader, namespaced
    from bot.mcp.connection import McpConnection, McpTiming  # the SDK loads only when a server is asked
    from bot.mcp.params import resolve
    from bot.mcp.schema import schema_problem
    from bot.tools import builtin_tools

    profile = ProfileLoader(settings.agents_dir, builtin_tools(), ids=is_id,
                            guardrails_file=settings.guardrails_file).load(agent)
    spec = profile.mcp.get(server)
    if spec is None:
        known = ", ".join(profile.mcp) or "none"
        raise ConfigError(f"The agent {agent!r} declares no MCP server {server!r} (it declares: {known}).")
    params = resolve(server, spec, profile.path.parent, os.environ)
    conn = McpConnection(params, McpTiming(startup=settings.mcp_startup_seconds), lambda _: None)
    try:
        await conn.start()
        if conn.state != "up":
            raise ConfigError(f"Could not connect to the MCP server {server!r} at {params.where()} ({conn.error}).")
        tools = list(conn.tools)
    finally:
        await conn.stop()
    allowed = spec.allowed()
    missing = sorted(set(allowed) - {t.name for t in tools})
    return [{"tool": t.name, "model_name": namespaced(server, t.name), "allowed": t.name in allowed,
             "schema_problem": schema_problem(t.input_schema), "description": t.description or "",
             "input_schema": t.input_schema} for t in tools], missing


@mcp_app.command("tools")
def tools_command(
    agent: Annotated[str, typer.Argument(help="Agent whose AGENT.md declares the server.")],
    server: Annotated[str, typer.Argument(help="Server name under `mcp:`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the tools with their input schemas as JSON.")] = False,
) -> None:
    """Connect to one MCP server and list every tool it offers: allowed or not, and whether the model API
    would accept its input schema. Nothing is called."""
    from bot.config import Settings

    try:
        settings = Settings()
        tools, missing = asyncio.run(offered_tools(settings, agent, server))
    except YokebotError as exc:
        err.print(f"[red]error:[/red] {escape(printable(str(exc)))}", highlight=False)
        raise typer.Exit(1) from None
    if as_json:
        print(json.dumps({"tools": tools, "allowed_not_offered": missing}, indent=2))
        return
    table = Table("tool", "model name", "allowed", "schema", "description")
    for t in tools:  # names and descriptions are the server's: Text (no markup), control characters shown
        table.add_row(shown(t["tool"]), shown(t["model_name"]), "yes" if t["allowed"] else "no",
                      shown("ok" if t["schema_problem"] is None else f"refused: {t['schema_problem']}"),
                      shown(((t["description"] or "-").splitlines() or ["-"])[0][:100]))
    out.print(table)
    if missing:
        err.print(f"[yellow]allowed but not offered:[/yellow] {escape(printable(', '.join(missing)))}",
                  highlight=False)


def shown(text: str) -> Text:
    """A server's text for the terminal: one line, control characters as U+FFFD, markup not interpreted."""
    return Text(printable(text, one_line=True))
