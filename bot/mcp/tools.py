"""An MCP tool as a yokebot `Tool`: registered in the same registry and run by the same ToolExecutor as a
built-in tool, so the allow-list, timeouts, retries, output caps, redaction and the `tool_invocations` row
are the executor's. The tool's description and input schema pass through as the server gives them."""

from __future__ import annotations

import copy
import json
from typing import Any, cast

from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, EmbeddedResource, ResourceLink, TextContent, TextResourceContents
from mcp_types import Tool as McpTool
from pydantic import BaseModel, ConfigDict, model_validator

from bot.engine.errors import ToolDenied, ToolFailed
from bot.engine.run import Tool, ToolContext
from bot.engine.spec import McpServerSpec, McpToolSettings, namespaced
from bot.mcp.connection import McpConnection, ServerLost, ServerUnavailable
from bot.mcp.schema import argument_problem

MAX_RESULT_CHARS = 1_000_000  # before the executor's own cap: a runaway server cannot fill the memory


def _args_model(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """Arguments as the server's JSON Schema describes them: checked here (the model reads what is wrong
    before anything reaches the server), and that schema is what the model is shown."""
    frozen = copy.deepcopy(schema)

    class McpArguments(BaseModel):
        model_config = ConfigDict(extra="allow")

        @model_validator(mode="before")
        @classmethod
        def _fits_schema(cls, data: Any) -> Any:
            problem = argument_problem(frozen, cast(dict[str, Any], data))
            if problem is not None:
                raise ValueError(problem)
            return data

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
            return copy.deepcopy(frozen)

    McpArguments.__name__ = McpArguments.__qualname__ = f"{name}Args"
    return McpArguments


def render(result: CallToolResult) -> str:
    """The content blocks as text for the model; images and audio are named, not inlined."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, EmbeddedResource):
            res = block.resource
            text = res.text if isinstance(res, TextResourceContents) else None
            parts.append(text or f"[binary resource {res.uri}, not shown]")
        elif isinstance(block, ResourceLink):
            parts.append(f"[resource {block.uri}]")
        else:  # an image, audio
            parts.append(f"[{block.type} content ({block.mime_type}), not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = "\n".join(parts)
    return text[:MAX_RESULT_CHARS]


def make_tool(connection: McpConnection, spec: McpTool, server: McpServerSpec) -> Tool[McpToolSettings]:
    name = namespaced(connection.name, spec.name)
    remote = spec.name
    key = server.connection_key()

    async def guard(ctx: ToolContext[McpToolSettings], _: BaseModel) -> None:
        """Only an agent that declares this very server (alike) and allows this tool reaches it: the
        registry is shared, the declaration is the caller's own."""
        declared = ctx.run.profile.mcp.get(connection.name)
        if declared is None or declared.connection_key() != key or remote not in declared.allowed():
            raise ToolDenied(f"{name} belongs to an MCP server this agent does not declare with that tool")

    async def call(ctx: ToolContext[McpToolSettings], /, **arguments: Any) -> str:
        try:
            result = await connection.call(remote, arguments)
        except (ServerUnavailable, ServerLost) as exc:
            raise ToolFailed(str(exc)) from None
        except MCPError as exc:
            raise ToolFailed(f"the MCP server {connection.name!r} refused the call: {exc}") from None
        text = render(result)
        if result.is_error:
            raise ToolFailed(text or f"{remote} reported an error without a message")
        return text

    description = (spec.description or spec.title or f"{remote} (from the MCP server {connection.name})").strip()
    return Tool(
        name=name, description=description, args_model=_args_model(name, spec.input_schema), fn=call,
        settings_model=McpToolSettings, guard=guard, timeout=server.timeout, side_effects=not read_only(spec),
        runs_alone=not read_only(spec),  # may have side effects: keep the model's order unless the server says so
    )


def read_only(spec: McpTool) -> bool:
    """The server says the tool changes nothing (MCP's `readOnlyHint`; absent means it may change things, so a
    turn cut short after it is not run again by the inbox's recovery)."""
    return spec.annotations is not None and spec.annotations.read_only_hint is True
