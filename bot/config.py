"""Settings: environment variables and `.env`, built once at start-up and passed in."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.engine.errors import ConfigError

DEFAULT_MODEL = "gpt-5-mini"


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

    discord_bot_token: SecretStr | None = Field(default=None, validation_alias=_env("DISCORD_BOT_TOKEN"))
    discord_api_url: str | None = Field(default=None, validation_alias=_env("DISCORD_API_URL"))
    discord_gateway_url: str | None = Field(default=None, validation_alias=_env("DISCORD_GATEWAY_URL"))

    # scheduling (docs/scheduling.md)
    scheduler_enabled: bool = True
    schedule_misfire_grace_seconds: float = 900.0
    schedule_poll_seconds: float = 5.0

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
