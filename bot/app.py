"""Composition root: Settings -> store, model, tools, service (and, for `yokebot run`, adapters)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.chat.notifier import AdapterNotifier
from bot.config import Settings
from bot.engine.errors import ConfigError, UnknownAgent
from bot.engine.executor import ToolExecutor, ToolPolicy
from bot.engine.loop import ReActLoop
from bot.engine.model import ChatModel, OpenAIChatModel, RetryPolicy
from bot.engine.plan import PlanExecutor
from bot.engine.profiles import AgentProfile, ProfileLoader
from bot.engine.prompt import PromptBuilder
from bot.engine.service import AgentService
from bot.engine.tooling import Tool
from bot.observability.metrics import Metrics
from bot.observability.store import ObservedStore
from bot.store.db import create_engine, ensure_schema
from bot.store.repositories import SqlStore
from bot.tools import builtin_tools
from bot.tools.redact import SecretRedactor

if TYPE_CHECKING:
    from bot.chat.discord_adapter import DiscordAdapter
    from bot.chat.slack_adapter import SlackAdapter


@dataclass
class App:
    settings: Settings
    engine: AsyncEngine
    store: SqlStore
    registry: dict[str, Tool]
    profiles: dict[str, AgentProfile]
    notifier: AdapterNotifier
    service: AgentService
    metrics: Metrics = field(default_factory=Metrics)  # this app's Prometheus registry (/metrics)
    model: ChatModel | None = None

    def profile(self, name: str) -> AgentProfile:
        try:
            return self.profiles[name]
        except KeyError:
            known = ", ".join(sorted(self.profiles)) or "none"
            raise UnknownAgent(
                f"No agent named {name!r} in {self.settings.agents_dir} (known agents: {known})."
            ) from None

    async def close(self) -> None:
        """Commit what is queued, close the model's HTTP client, release the database."""
        await self.store.close()
        close_model = getattr(self.model, "close", None)
        if close_model is not None:
            await close_model()
        await self.engine.dispose()


def load_profiles(settings: Settings, registry: dict[str, Tool]) -> dict[str, AgentProfile]:
    return ProfileLoader(settings.agents_dir, registry).load_all()


async def open_store(settings: Settings, *, migrate: bool = True) -> tuple[AsyncEngine, SqlStore]:
    engine = create_engine(settings.database_url)
    if migrate:
        try:
            await ensure_schema(engine)
        except (OSError, SQLAlchemyError) as exc:
            await engine.dispose()
            where = make_url(settings.database_url).render_as_string(hide_password=True)
            orig = getattr(exc, "orig", None) or exc
            first = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
            raise ConfigError(
                f"Could not open the database at {where} ({first}); check YOKEBOT_DATABASE_URL."
            ) from None
    return engine, SqlStore(engine)


async def build_app(
    settings: Settings,
    *,
    model: ChatModel | None = None,
    registry: dict[str, Tool] | None = None,
    clock: Callable[[], datetime] | None = None,
) -> App:
    registry = registry if registry is not None else builtin_tools()
    profiles = load_profiles(settings, registry)
    if model is None:
        settings.require_model_endpoint()
    engine, store = await open_store(settings)
    metrics = Metrics()
    observed = ObservedStore(store, metrics)  # counts turns, model and tool calls, then delegates
    if model is None:
        model = OpenAIChatModel(
            api_key=settings.api_key(),
            base_url=settings.openai_base_url,
            audit=observed,
            retry=RetryPolicy(settings.model_max_attempts, settings.model_retry_base_seconds,
                              settings.model_retry_max_wait_seconds),
            timeout=settings.model_timeout_seconds,
            stream=settings.model_stream,
        )
    executor = ToolExecutor(
        registry, observed,
        ToolPolicy(settings.tool_max_attempts, settings.tool_backoff_seconds, settings.tool_max_output_chars),
        redact=SecretRedactor(settings.secret_values()),
    )
    notifier = AdapterNotifier()
    prompts = PromptBuilder(memory=store, clock=clock) if clock else PromptBuilder(memory=store)
    loop = ReActLoop(model, executor, prompts, settings.model)
    app = App(settings, engine, store, registry, profiles, notifier, None, metrics, model)  # type: ignore[arg-type]
    app.service = AgentService(observed, loop, app.profile, notifier=notifier, memory=store,
                               planner=PlanExecutor(loop, recorder=store))
    return app


def build_slack(app: App) -> SlackAdapter | None:
    """The Slack adapter when SLACK_BOT_TOKEN is set (Socket Mode with SLACK_APP_TOKEN, else HTTP Events),
    registered with the notifier so `notify` can post to `slack:#name` / `slack:C123`."""
    if app.settings.slack_bot_token is None:
        return None
    from bot.chat.slack_adapter import SlackAdapter

    adapter = SlackAdapter(app.settings, app.service, app.profiles, app.store, app.metrics)
    app.notifier.register(adapter)
    return adapter


def build_discord(app: App) -> DiscordAdapter | None:
    """The Discord adapter when DISCORD_BOT_TOKEN is set (not connected yet: `start()` it), registered with the
    notifier so `notify` can post to `discord:#name` / `discord:123`."""
    if app.settings.discord_bot_token is None:
        return None
    from bot.chat.discord_adapter import DiscordAdapter

    adapter = DiscordAdapter(app.service, app.settings, app.profiles, claims=app.store, metrics=app.metrics)
    app.notifier.register(adapter)
    return adapter
