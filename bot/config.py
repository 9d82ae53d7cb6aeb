"""Settings: environment variables and `.env`, built once at start-up and passed in."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from bot.engine.errors import ConfigError

DEFAULT_MODEL = "gpt-5-mini"


class ModelPrice(BaseModel):
    """USD per one million tokens, as providers publish them."""

    input: float
    output: float


def _env(name: str) -> AliasChoices:
    return AliasChoices(name, name.lower())


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="YOKEBOT_", env_file=".env", extra="ignore")

    database_url: str = "sqlite+aiosqlite:///./yokebot.db"
    agents_dir: Path = Path("./agents")
    default_agent: str = "ops"
    model: str = DEFAULT_MODEL
    http_port: int = 8080
    log_level: str = "INFO"
    log_format: str = "text"
    # YOKEBOT_MODEL_PRICES='{"gpt-5-mini": {"input": 0.25, "output": 2.0}}' for `yokebot usage` cost estimates
    model_prices: dict[str, ModelPrice] = Field(default_factory=lambda: dict[str, ModelPrice]())

    openai_api_key: SecretStr | None = Field(default=None, validation_alias=_env("OPENAI_API_KEY"))
    openai_base_url: str | None = Field(default=None, validation_alias=_env("OPENAI_BASE_URL"))
    model_max_attempts: int = 3
    model_retry_base_seconds: float = 0.5
    model_retry_max_wait_seconds: float = 20.0
    model_timeout_seconds: float = 60.0
    model_stream: bool = False

    tool_max_attempts: int = 3
    tool_backoff_seconds: float = 0.2
    tool_max_output_chars: int = 16_000

    slack_bot_token: SecretStr | None = Field(default=None, validation_alias=_env("SLACK_BOT_TOKEN"))
    slack_app_token: SecretStr | None = Field(default=None, validation_alias=_env("SLACK_APP_TOKEN"))
    slack_signing_secret: SecretStr | None = Field(default=None, validation_alias=_env("SLACK_SIGNING_SECRET"))
    slack_api_url: str = Field(default="https://slack.com/api/", validation_alias=_env("SLACK_API_URL"))
    # Slack behaviour (docs/slack.md). Allow-lists hold immutable IDs (U…, C…/G…), comma-separated; empty = all.
    slack_allowed_users: Annotated[list[str], NoDecode] = Field(default_factory=list)
    slack_allowed_channels: Annotated[list[str], NoDecode] = Field(default_factory=list)
    slack_allow_dms: bool = True
    slack_thread_followups: bool = True
    slack_ignore_bots: bool = True
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
    discord_allowed_users: str = ""
    discord_allowed_roles: str = ""
    discord_allowed_channels: str = ""
    discord_attach_over_chars: int = 6000
    discord_guild_ready_timeout: float = 2.0
    discord_drain_seconds: float = 30.0
    discord_max_concurrent_turns: int = Field(default=8, ge=1)

    @field_validator("slack_allowed_users", "slack_allowed_channels", mode="before")
    @classmethod
    def _id_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.replace(";", ",").split(",") if part.strip()]
        return value

    # scheduling (docs/scheduling.md)
    scheduler_enabled: bool = True
    schedule_misfire_grace_seconds: float = 900.0
    schedule_poll_seconds: float = 5.0
    schedule_drain_seconds: float = 30.0  # on stop, runs in flight get this long to finish and post

    def require_model_endpoint(self) -> None:
        if self.openai_api_key is None and not self.openai_base_url:
            raise ConfigError(
                "No model endpoint is configured: set OPENAI_API_KEY (for OpenAI) or OPENAI_BASE_URL (for an "
                "OpenAI-compatible server such as Ollama, vLLM or llama.cpp), in the environment or in a .env file."
            )

    def api_key(self) -> str:
        # Local OpenAI-compatible servers usually ignore the key, but the SDK insists on one.
        return self.openai_api_key.get_secret_value() if self.openai_api_key else "not-needed"

    def secret_values(self) -> list[str]:
        """Values that must never reach a log line, a model or an audit row."""
        secrets = [self.openai_api_key, self.slack_bot_token, self.slack_app_token, self.slack_signing_secret,
                   self.discord_bot_token]
        return [s.get_secret_value() for s in secrets if s is not None and len(s.get_secret_value()) >= 6]
