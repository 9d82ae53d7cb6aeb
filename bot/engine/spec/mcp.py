"""The `mcp:` section of AGENT.md: which Model Context Protocol servers an agent uses and which of their
tools it may call. Data only: `bot/mcp` connects to the servers; the engine imports no MCP SDK.

    mcp:
      grafana:                                   # server name: the prefix of its tools (grafana__query)
        url: https://grafana-mcp.internal/mcp    # streamable HTTP ...
        headers: {Authorization: "Bearer ${GRAFANA_MCP_TOKEN}"}   # values from the environment only
        tools: [query_prometheus, list_dashboards]               # the allow-list; nothing by default
      files:
        command: npx                             # ... or stdio: a command run without a shell
        args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv/runbooks"]
        env: {LOG_LEVEL: warn, API_TOKEN: "${FILES_TOKEN}"}
        tools: {read_text_file: {timeout: 10}}   # per-tool settings, as for built-in tools
"""

from __future__ import annotations

import re
from typing import Any, Literal, cast
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bot.engine.spec.toolsettings import ToolSettings

# No "__" and no "_" at the end: then the first "__" of a model name ends the server's name, so a model name
# has exactly one (server, tool) reading ("c_" + "_x" and "c" + "__x" would both be "c____x").
SERVER_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]|_(?!_|$)){0,29}$")
MODEL_TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # what OpenAI accepts as a function name
ENV_REF_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
SEPARATOR = "__"


def namespaced(server: str, tool: str) -> str:
    """The name the model sees: `grafana__query_prometheus`."""
    return f"{server}{SEPARATOR}{tool}"


def split_name(name: str) -> tuple[str, str] | None:
    """(server, tool) of a model name, or None for a name without the separator (a built-in tool)."""
    server, sep, tool = name.partition(SEPARATOR)
    return (server, tool) if sep and tool else None


class McpToolSettings(ToolSettings):
    """Per-tool settings of an MCP tool: the same as a built-in tool's (timeout, max_attempts, and whatever
    ToolSettings gains), so a policy written for built-in tools applies to MCP tools too."""


class McpServerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=lambda: cast(dict[str, str], {}))
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=lambda: cast(dict[str, str], {}))
    timeout: float = Field(default=30.0, gt=0, le=3600)  # per call, unless the tool's settings say otherwise
    # stdio only: the OS sandbox the command runs in (bot/tools/isolation.py, docs/sandbox.md)
    isolation: Literal["required", "preferred"] = "required"
    network: bool = True  # most servers call an API; `false` gives the server no network at all
    read: tuple[str, ...] = ()  # paths the server may read (relative to the agent's folder)
    write: tuple[str, ...] = ()  # paths the server may read and write
    tools: dict[str, dict[str, Any] | None] | list[str] = Field(default_factory=lambda: cast(list[str], []))

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def connection_key(self) -> dict[str, Any]:
        """What identifies the server (everything but the allow-list): two agents naming one server alike."""
        return self.model_dump(exclude={"tools", "timeout"})

    def allowed(self) -> dict[str, dict[str, Any]]:
        if isinstance(self.tools, list):
            return {name: {} for name in self.tools}
        return {name: conf or {} for name, conf in self.tools.items()}

    @field_validator("headers")
    @classmethod
    def _headers_from_env(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not ENV_REF_RE.search(text):
                raise ValueError(f"header {name!r} must take its value from the environment, like "
                                 f"\"Bearer ${{TOKEN_VAR}}\" (no literal secrets in AGENT.md)")
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not an http(s) URL")
        if parts.password is not None:
            raise ValueError("the URL carries a password; send credentials in headers taken from the environment")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (stdio) or url (streamable HTTP)")
        if self.url is not None and (self.args or self.env or self.cwd or self.read or self.write
                                     or not self.network or "isolation" in self.model_fields_set):
            raise ValueError("args, env, cwd, read, write, network and isolation are for stdio servers "
                             "(command:), not for url:")
        if self.command is not None and self.headers:
            raise ValueError("headers are for HTTP servers (url:), not for command:")
        return self


def mcp_tool_settings(servers: dict[str, McpServerSpec]) -> dict[str, McpToolSettings]:
    """The allowed MCP tools of one profile under their model names, with their settings. ValueError carries
    (location, message) for the profile loader to point at the line."""
    out: dict[str, McpToolSettings] = {}
    for server, spec in servers.items():
        if not SERVER_NAME_RE.match(server):
            raise McpSpecError(("mcp", server), "not a valid server name (lowercase letters, digits, - and "
                               "single _ not at the end, at most 30 characters)")
        for tool, conf in spec.allowed().items():
            name = namespaced(server, tool)
            if not MODEL_TOOL_NAME_RE.match(name):
                raise McpSpecError(("mcp", server, "tools", tool), f"the model name {name!r} does not fit "
                                   "^[a-zA-Z0-9_-]{1,64}$ (what the model API accepts)")
            try:
                out[name] = McpToolSettings.model_validate(conf)
            except ValidationError as exc:
                err = exc.errors()[0]
                msg = "unknown setting" if err["type"] == "extra_forbidden" else err["msg"]
                raise McpSpecError(("mcp", server, "tools", tool, *err["loc"]), msg) from None
    return out


class McpSpecError(ValueError):
    def __init__(self, loc: tuple[Any, ...], message: str) -> None:
        super().__init__(message)
        self.loc, self.message = loc, message
