"""Settings: environment variables and `.env`, built once at start-up and passed in."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from bot.engine.errors import ConfigError
from bot.engine.spec import ProgressMode

log = logging.getLogger(__name__)

DEFAULT_MODEL = "gpt-5-mini"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# the forms people paste -> the async drivers yokebot ships with
ASYNC_DRIVERS = {"postgresql": "postgresql+asyncpg", "postgres": "postgresql+asyncpg", "sqlite": "sqlite+aiosqlite"}


class ModelPrice(BaseModel):
    """USD per one million tokens, as providers publish them."""

    input: float
    output: float


def _state_dir() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "yokebot"


def default_agents_dir() -> Path:
    """`./agents` when the folder yokebot starts in has one (a checkout); otherwise the agents installed with
    yokebot (bot/shipped), so an install outside a checkout (`pipx install .`) finds its agents."""
    if Path("agents").is_dir():
        return Path("./agents")
    from bot.shipped import shipped_agents

    return shipped_agents() or Path("./agents")


def _env(name: str) -> AliasChoices:
    return AliasChoices(name, name.lower())


def _split_ids(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.replace(";", ",").split(",") if part.strip()]
    return value


# a list setting written as one variable: comma- (or semicolon-) separated; every platform's allow-lists use it
IdList = Annotated[list[str], NoDecode, BeforeValidator(_split_ids)]


class Settings(BaseSettings):
    # env_ignore_empty: `SLACK_BOT_TOKEN=` (as in .env.example) means unset, not an empty token
    model_config = SettingsConfigDict(env_prefix="YOKEBOT_", env_file=".env", extra="ignore", env_ignore_empty=True)

    database_url: str = "sqlite+aiosqlite:///./yokebot.db"
    # PostgreSQL behind a transaction pooler (PgBouncer): the same database without it, for what needs a database
    # session of its own (locks, LISTEN, the writer, migrations; docs/scale-out.md)
    database_direct_url: str | None = None
    agents_dir: Path = Field(default_factory=default_agents_dir)  # ./agents, else the agents installed with yokebot
    runbooks_dir: Path | None = None  # runbooks every agent has, beside its own runbooks/ (docs/knowledge.md)
    guardrails_file: Path | None = None  # the shared default of every agent's `guardrails:` (docs/guardrails.md)
    default_agent: str = "ops"
    model: str = DEFAULT_MODEL
    http_port: int = 8080
    # 0.0.0.0 so that a container's port mapping and a load balancer reach it; 127.0.0.1 keeps it on the host
    http_host: str = "0.0.0.0"  # noqa: S104 - a server is meant to listen (docs/scale-out.md)
    # set: /metrics and /readyz answer only `Authorization: Bearer <token>` (/healthz stays open; docs/deploy.md)
    metrics_token: SecretStr | None = None
    # how long a database outage is waited out (a turn's rows held in memory) before its rows are given up
    db_outage_seconds: float = Field(default=120.0, ge=0)
    # an instance holds the inbox events it works on for this long, renewed every third of it; a dead
    # instance's events are taken over by another once it runs out
    inbox_lease_seconds: float = Field(default=30.0, gt=0)
    chat_log_file: Path = Field(default_factory=lambda: _state_dir() / "chat.log")  # log lines of `yokebot chat`
    log_level: str = "INFO"
    log_format: str = "text"
    # YOKEBOT_MODEL_PRICES='{"gpt-5-mini": {"input": 0.25, "output": 2.0}}' for `yokebot usage` cost estimates
    model_prices: dict[str, ModelPrice] = Field(default_factory=lambda: dict[str, ModelPrice]())
    # a cap on what every agent together may spend per UTC day, in USD (docs/guardrails.md "Spend caps")
    spend_daily_usd: float | None = Field(default=None, gt=0)

    # files attached to a message (docs/attachments.md: "Caps and limits")
    attachment_max_files: int = Field(default=10, ge=1, le=100)  # read per message; the rest are named as not read
    attachment_max_mb: float = Field(default=25.0, gt=0, le=1024)  # fetched per file (stopped while streaming)
    attachment_max_inflated_mb: float = Field(default=50.0, gt=0, le=4096)  # what a gzip file may inflate to
    attachment_max_image_mb: float = Field(default=5.0, gt=0, le=50)  # an image sent to the model
    attachment_max_chars: int = Field(default=40_000, ge=1000, le=1_000_000)  # shown of one text file
    attachment_fetch_seconds: float = Field(default=30.0, gt=0, le=600)  # per file

    # alert webhooks (docs/alerts.md): POST /hooks/alertmanager and /hooks/grafana exist only when this is set
    webhook_token: SecretStr | None = None
    alert_max_concurrent: int = Field(default=2, ge=1)  # investigations running at once in this process
    alert_max_per_10m: int = Field(default=10, ge=0)  # investigations started per 10 minutes (all instances)

    openai_api_key: SecretStr | None = Field(default=None, validation_alias=_env("OPENAI_API_KEY"))
    openai_base_url: str | None = Field(default=None, validation_alias=_env("OPENAI_BASE_URL"))
    model_max_attempts: int = 3
    model_retry_base_seconds: float = 0.5
    model_retry_max_wait_seconds: float = 20.0
    model_timeout_seconds: float = 60.0
    model_stream: bool = False
    # the endpoint's embeddings model for memory recall (docs/knowledge.md); unset: memories ranked by keywords
    embedding_model: str | None = None
    progress_live: bool = True  # a status message and the answer as it is written (Slack, Discord)
    progress_steps: ProgressMode = "compact"  # tool steps shown in chat while working
    progress_interval_seconds: float = 1.0  # the least time between two progress edits of one reply

    tool_max_attempts: int = 3
    tool_backoff_seconds: float = 0.2
    tool_max_output_chars: int = 16_000

    slack_bot_token: SecretStr | None = Field(default=None, validation_alias=_env("SLACK_BOT_TOKEN"))
    slack_app_token: SecretStr | None = Field(default=None, validation_alias=_env("SLACK_APP_TOKEN"))
    slack_signing_secret: SecretStr | None = Field(default=None, validation_alias=_env("SLACK_SIGNING_SECRET"))
    slack_api_url: str = Field(default="https://slack.com/api/", validation_alias=_env("SLACK_API_URL"))
    # Slack behaviour (docs/slack.md). Allow-lists hold immutable IDs (U…, C…/G…), comma-separated; empty = all.
    slack_allowed_users: IdList = Field(default_factory=list)
    slack_allowed_channels: IdList = Field(default_factory=list)
    slack_allow_dms: bool = True
    slack_thread_followups: bool = True
    # assistant threads (slack/manifest.yaml `assistant_view`): prompts offered when one opens, `;`-separated
    slack_suggested_prompts: str = "Check the recent nginx error logs; What can you check for me?"
    slack_answer_bots: bool = False  # answer other bots' messages (its own are never answered), as on Discord
    # deprecated: YOKEBOT_SLACK_IGNORE_BOTS, the inverse of YOKEBOT_SLACK_ANSWER_BOTS (read when that is not set)
    slack_ignore_bots: bool | None = Field(default=None, exclude=True)
    slack_max_concurrent_turns: int = Field(default=8, ge=1)
    slack_message_chars: int = Field(default=3900, ge=100, le=39_000)
    slack_file_threshold_chars: int = Field(default=12_000, ge=100)
    slack_rate_limit_retries: int = Field(default=3, ge=0)
    slack_drain_seconds: float = Field(default=30.0, ge=0)

    discord_bot_token: SecretStr | None = Field(default=None, validation_alias=_env("DISCORD_BOT_TOKEN"))
    discord_api_url: str | None = Field(default=None, validation_alias=_env("DISCORD_API_URL"))
    discord_gateway_url: str | None = Field(default=None, validation_alias=_env("DISCORD_GATEWAY_URL"))
    # Discord behaviour (YOKEBOT_DISCORD_*); allow-lists are comma-separated IDs (roles: IDs or names), empty = all
    discord_reply_inline: bool = False
    discord_answer_bots: bool = False
    # allow-lists hold IDs (snowflakes; `dm` in channels), comma-separated; empty = all
    discord_allowed_users: IdList = Field(default_factory=list)
    discord_allowed_roles: IdList = Field(default_factory=list)
    discord_allowed_channels: IdList = Field(default_factory=list)
    # the guilds `/yokebot` is registered in (instant updates); empty: globally (docs/commands.md)
    discord_command_guilds: IdList = Field(default_factory=list, validation_alias=_env("DISCORD_COMMAND_GUILDS"))
    discord_attach_over_chars: int = 6000
    discord_guild_ready_timeout: float = 2.0
    discord_drain_seconds: float = 30.0
    discord_max_concurrent_turns: int = Field(default=8, ge=1)

    # Microsoft Teams (docs/teams.md): the Azure Bot's app registration, a client secret or a certificate
    teams_app_id: str | None = Field(default=None, validation_alias=_env("TEAMS_APP_ID"))
    teams_app_password: SecretStr | None = Field(default=None, validation_alias=_env("TEAMS_APP_PASSWORD"))
    teams_certificate_path: Path | None = Field(default=None, validation_alias=_env("TEAMS_CERTIFICATE_PATH"))
    teams_tenant_id: str | None = Field(default=None, validation_alias=_env("TEAMS_TENANT_ID"))
    teams_openid_metadata_url: str = Field(default="https://login.botframework.com/v1/.well-known/openidconfiguration",
                                           validation_alias=_env("TEAMS_OPENID_METADATA_URL"))
    teams_login_url: str = Field(default="https://login.microsoftonline.com", validation_alias=_env("TEAMS_LOGIN_URL"))
    # the Bot Connector hosts a reply may go to (an activity's serviceUrl must start with one); sovereign clouds
    # and proxies add theirs here
    teams_service_urls: IdList = Field(default_factory=lambda: [
        "https://smba.trafficmanager.net/", "https://smba.infra.gcc.teams.microsoft.com/",
        "https://smba.infra.gov.teams.microsoft.us/", "https://smba.infra.dod.teams.microsoft.us/"])
    # allow-lists hold IDs: users by AAD object id, channels and chats by conversation id (`dm`: personal chats)
    teams_allowed_users: IdList = Field(default_factory=list)
    teams_allowed_channels: IdList = Field(default_factory=list)
    teams_drain_seconds: float = Field(default=30.0, ge=0)
    teams_max_concurrent_turns: int = Field(default=8, ge=1)

    mattermost_url: str | None = Field(default=None, validation_alias=_env("MATTERMOST_URL"))
    mattermost_bot_token: SecretStr | None = Field(default=None, validation_alias=_env("MATTERMOST_BOT_TOKEN"))
    # Mattermost behaviour (docs/mattermost.md); allow-lists hold IDs (26 characters; `dm` in channels), empty = all
    mattermost_answer_bots: bool = False
    mattermost_allowed_users: IdList = Field(default_factory=list)
    mattermost_allowed_teams: IdList = Field(default_factory=list)
    mattermost_allowed_channels: IdList = Field(default_factory=list)
    # where Mattermost reaches yokebot's HTTP server for the Approve / Deny buttons (POST …/mattermost/actions)
    mattermost_actions_url: str | None = None
    # the token Mattermost gives the custom slash command /yokebot (POST …/mattermost/commands; docs/commands.md)
    mattermost_command_token: SecretStr | None = None
    mattermost_attach_over_chars: int = Field(default=32_000, ge=100)
    mattermost_reconnect_max_seconds: float = Field(default=30.0, gt=0)
    mattermost_drain_seconds: float = Field(default=30.0, ge=0)
    mattermost_max_concurrent_turns: int = Field(default=8, ge=1)

    @field_validator("database_url")
    @classmethod
    def _async_driver(cls, value: str) -> str:
        return async_database_url(value)

    @field_validator("database_direct_url")
    @classmethod
    def _async_driver_direct(cls, value: str | None) -> str | None:
        return async_database_url(value) if value else None

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        if value.upper() not in LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
        return value.upper()

    @field_validator("log_format")
    @classmethod
    def _log_format(cls, value: str) -> str:
        if value.lower() not in ("text", "json"):
            raise ValueError("must be text or json")
        return value.lower()

    @model_validator(mode="after")
    def _deprecated_names(self) -> Settings:
        """A renamed setting's old variable still works (the new one wins when both are set), with a warning."""
        if self.slack_ignore_bots is not None:
            deprecated("YOKEBOT_SLACK_IGNORE_BOTS", "YOKEBOT_SLACK_ANSWER_BOTS (its inverse)")
            if "slack_answer_bots" not in self.model_fields_set:
                self.slack_answer_bots = not self.slack_ignore_bots
        return self

    # scheduling (docs/scheduling.md)
    scheduler_enabled: bool = True
    schedule_misfire_grace_seconds: float = 900.0
    schedule_poll_seconds: float = 5.0
    schedule_drain_seconds: float = 30.0  # on stop, runs in flight get this long to finish and post

    # MCP servers of the profiles' `mcp:` sections (docs/mcp.md)
    mcp_startup_seconds: float = Field(default=20.0, gt=0)  # start-up waits this long for each server
    mcp_backoff_base_seconds: float = Field(default=1.0, gt=0)  # reconnects: 1 s, 2 s, 4 s ... up to the max
    mcp_backoff_max_seconds: float = Field(default=60.0, gt=0)
    mcp_health_seconds: float = Field(default=30.0, gt=0)  # how often a connected server is checked
    mcp_health_timeout_seconds: float = Field(default=5.0, gt=0)

    # OpenTelemetry traces (docs/observability.md), the standard variables: no endpoint, no tracing (and the
    # SDK is not imported). The exporter reads the other OTEL_* variables (headers, timeout, sampler) itself.
    otel_traces_endpoint: str | None = Field(default=None, validation_alias=AliasChoices(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "otel_traces_endpoint"))
    otel_endpoint: str | None = Field(default=None, validation_alias=AliasChoices(
        "OTEL_EXPORTER_OTLP_ENDPOINT", "otel_endpoint"))
    otel_protocol: str = Field(default="http/protobuf", validation_alias=AliasChoices(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL", "otel_protocol"))
    # only read to keep its values out of logs (an exporter's token: `Authorization=Basic ...`)
    otel_headers: SecretStr | None = Field(default=None, validation_alias=AliasChoices(
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS", "otel_headers"))
    otel_capture_content: bool = Field(default=False, validation_alias=AliasChoices(
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "otel_capture_content"))

    def traces_endpoint(self) -> str | None:
        """Where spans go: the traces endpoint as given, else the base endpoint (`/v1/traces` added for HTTP)."""
        if self.otel_traces_endpoint:
            return self.otel_traces_endpoint
        if not self.otel_endpoint:
            return None
        return self.otel_endpoint if self.otel_protocol == "grpc" else self.otel_endpoint.rstrip("/") + "/v1/traces"

    def require_model_endpoint(self) -> None:
        if self.openai_api_key is None and not self.openai_base_url:
            raise ConfigError(
                "No model endpoint is configured: set OPENAI_API_KEY (for OpenAI) or OPENAI_BASE_URL (for an "
                "OpenAI-compatible server such as Ollama, vLLM or llama.cpp, with YOKEBOT_MODEL naming a model it "
                "serves), in the environment or in a .env file."
            )

    def api_key(self) -> str:
        # Local OpenAI-compatible servers usually ignore the key, but the SDK insists on one.
        return self.openai_api_key.get_secret_value() if self.openai_api_key else "not-needed"

    def secret_values(self) -> list[str]:
        """Values that must never reach a log line, a model or an audit row."""
        secrets = [getattr(self, name) for name in type(self).model_fields if name != "otel_headers"]
        values = [s.get_secret_value() for s in secrets if isinstance(s, SecretStr)]  # every token, any platform's
        if self.otel_headers is not None:  # `key=value,key2=value2`, values URL-encoded
            from urllib.parse import unquote

            pairs = self.otel_headers.get_secret_value().split(",")
            values += [unquote(v.partition("=")[2]).strip() for v in pairs]
            values += [w for v in values[-len(pairs):] for w in v.split() if len(w) >= 6]  # `Basic <token>`
        return [v for v in values if len(v) >= 6]


_warned: set[str] = set()  # the deprecated variables already warned about in this process


def deprecated(old: str, new: str) -> None:
    """Log once per process that `old` is read for now, and what to set instead."""
    if old not in _warned:
        _warned.add(old)
        log.warning("%s is deprecated and will be removed: set %s instead", old, new)


def async_database_url(value: str) -> str:
    """`postgresql://…` (as people paste it) -> `postgresql+asyncpg://…`, `sqlite:///…` -> `sqlite+aiosqlite:///…`,
    through SQLAlchemy's URL API; an explicit async driver is kept."""
    from sqlalchemy.engine import make_url  # here, not at the top: `yokebot --help` does not load SQLAlchemy
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(value.strip())
    except ArgumentError:
        raise ValueError(
            "is not a database URL; write sqlite+aiosqlite:///path/to/yokebot.db or "
            "postgresql+asyncpg://user:password@host:5432/dbname"
        ) from None
    driver = ASYNC_DRIVERS.get(url.drivername)
    if driver is not None:
        url = url.set(drivername=driver)
    elif url.get_backend_name() == "postgres":
        url = url.set(drivername="postgresql+asyncpg")
    if url.drivername not in ("postgresql+asyncpg", "sqlite+aiosqlite"):
        raise ValueError(f"uses the driver {url.drivername!r}; yokebot speaks postgresql+asyncpg and sqlite+aiosqlite")
    return url.render_as_string(hide_password=False)


def env_name(field: str) -> str:
    """The environment variable a settings field is read from."""
    info = Settings.model_fields.get(field)
    alias = info.validation_alias if info is not None else None
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return f"YOKEBOT_{field.upper()}"


def _field_of(loc: tuple[Any, ...]) -> str:
    name = str(loc[0]) if loc else "?"
    for field, info in Settings.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices) and name in [str(c) for c in alias.choices]:
            return field
    return name


def describe_error(exc: ValidationError) -> str:
    """One sentence per bad setting, naming the variable, not the Python field."""
    parts: list[str] = []
    for error in exc.errors():
        var = env_name(_field_of(tuple(error["loc"])))
        value = error.get("input")
        shown = "" if isinstance(value, dict) or "token" in var.lower() or "key" in var.lower() \
            or "secret" in var.lower() else f"={value!r}"
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{var}{shown}: {message}")
    return "; ".join(parts)


def _env_file_keys(path: Path) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    keys = [line.split("=", 1)[0].removeprefix("export ").strip() for line in lines if "=" in line]
    return [k for k in keys if k and not k.startswith("#")]


# read by the tests and benchmarks, not by yokebot (.ci/run exports some of them): no warning for these
TEST_VARIABLES = frozenset({"YOKEBOT_TEST_PG_URL", "YOKEBOT_REQUIRE_PG", "YOKEBOT_REQUIRE_PROMETHEUS",
                            "YOKEBOT_REQUIRE_PGVECTOR", "YOKEBOT_REQUIRE_SQLITE_VEC", "YOKEBOT_SQLITE_VEC_PYTHON",
                            "YOKEBOT_BENCH_PG_URL", "YOKEBOT_BENCH_LOOP"})


def unknown_variables(environ: dict[str, str] | None = None, env_file: Path | None = Path(".env")) -> list[str]:
    """A warning for each YOKEBOT_* variable yokebot does not read, with the nearest name it does."""
    import difflib

    known = {env_name(field) for field in Settings.model_fields} | TEST_VARIABLES
    seen = list(environ if environ is not None else os.environ)
    if env_file is not None:
        seen += _env_file_keys(env_file)
    warnings: list[str] = []
    for name in dict.fromkeys(k.upper() for k in seen):
        if name.startswith("YOKEBOT_") and name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
            hint = f"; did you mean {close[0]}?" if close else "; README.md lists the settings"
            warnings.append(f"{name} is not a yokebot setting and is ignored{hint}")
    return warnings


def load_settings(**values: Any) -> Settings:
    """Settings from the environment and `.env`; a bad value is a ConfigError naming the variable."""
    try:
        return Settings(**values)
    except ValidationError as exc:
        raise ConfigError(f"Invalid setting: {describe_error(exc)}.") from None
