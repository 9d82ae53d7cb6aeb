"""Composition root: Settings -> store, model, tools, service (and, for `yokebot run`, the platforms)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.approvals.desk import ApprovalDesk
from bot.approvals.store import ApprovalStore
from bot.chat.core.inbox_turns import InboxTurns
from bot.chat.core.notifier import AdapterNotifier, Fallback
from bot.chat.core.platform import Platform, PlatformParts
from bot.chat.platforms import build_platform, configured, hints, register_posting_adapters
from bot.chat.platforms import is_id as platform_id
from bot.chat.platforms import names as platform_names
from bot.config import Settings
from bot.engine.context import AttachmentLimits, PromptBuilder, family_window, learn_windows
from bot.engine.errors import ConfigError, ProfileError, UnknownAgent
from bot.engine.model import ChatModel, Embeddings, OpenAIChatModel, RetryingModel, RetryPolicy
from bot.engine.ports import Embedder
from bot.engine.run import (
    CompositeHooks,
    PlanExecutor,
    PriceOf,
    ReActLoop,
    SpendCaps,
    Tool,
    ToolExecutor,
    ToolPolicy,
    TurnHooks,
)
from bot.engine.service import AgentService
from bot.engine.spec import AgentProfile, ProfileLoader
from bot.observability.hooks import MetricsHooks
from bot.observability.logs import redact_also
from bot.observability.usage import price_for
from bot.redact import SecretRedactor
from bot.store.conversations import SqlConversationRefs
from bot.store.db import MigrationLockTimeout, create_engine, ensure_schema
from bot.store.inbox import SqlInbox
from bot.store.instances import InstanceLease
from bot.store.notify_ledger import SqlNotifyLedger
from bot.store.pooling import is_postgres, misconfigured, probe
from bot.store.recorder import SqlRecorder
from bot.store.repositories import SqlStore
from bot.store.session_lock import PgSessionLock
from bot.store.spend import SqlSpendLedger
from bot.tools import builtin_tools
from bot.tools.notify import NotifySpec

if TYPE_CHECKING:
    from bot.mcp.manager import McpManager
    from bot.observability.metrics import Metrics
    from bot.observability.otel import Tracing


@dataclass(frozen=True, slots=True)
class App:
    """Everything `build_app` made, frozen: nothing is assigned into it, or into its parts, afterwards."""

    settings: Settings
    engine: AsyncEngine
    store: SqlStore
    registry: dict[str, Tool[Any]]
    profiles: dict[str, AgentProfile]
    notifier: AdapterNotifier
    service: AgentService
    model: ChatModel
    inbox: SqlInbox
    inbox_turns: InboxTurns  # the exactly-once step on the inbox (bot/chat/core/inbox_turns.py)
    approvals: ApprovalDesk  # asks a human before a gated tool runs (docs/approvals.md)
    # this app's Prometheus registry (/metrics); None for the terminal commands, which export nothing
    metrics: Metrics | None = None
    session_lock: PgSessionLock | None = None  # PostgreSQL: one turn per thread across instances
    mcp: McpManager | None = None  # the profiles' MCP servers, when any agent declares one
    lease: InstanceLease | None = None  # PostgreSQL: this process is alive (its turns are not swept)
    tracing: Tracing | None = None  # OTLP traces, when an endpoint is set (docs/observability.md)
    spend: SpendCaps | None = None  # the spend caps, when any is set (docs/guardrails.md "Spend caps")

    def profile(self, name: str) -> AgentProfile:
        return find_profile(self.profiles, self.settings.agents_dir, name)

    @property
    def session_url(self) -> str:
        """Where what needs a database session of its own goes: the direct URL behind a pooler (the session
        locks, the scheduler's leader lock, bot/store/pooling.py)."""
        return self.store.direct.url.render_as_string(hide_password=False)

    async def close(self) -> None:
        """Stop the MCP servers, commit what is queued, close the model's HTTP client, release the database."""
        if self.mcp is not None:
            await self.mcp.stop()
        self.approvals.close()
        await self.inbox.close()  # its leases' heartbeat, its LISTEN connection
        await self.store.close()
        if self.spend is not None:
            await self.spend.close()  # the slots' connection or lock file
        if self.lease is not None:  # after the turns' rows are written: nothing of this process runs now
            await self.lease.stop()
        if self.session_lock is not None:
            await self.session_lock.close()
        await self.model.close()
        await self.engine.dispose()
        if self.tracing is not None:  # last: the turns' spans have all ended; the flush is bounded
            await self.tracing.close()


def model_price(settings: Settings) -> PriceOf:
    """The engine's view of the price table (it imports nothing of observability): USD per 1M tokens."""
    prices = settings.model_prices

    def price(model: str) -> tuple[float, float] | None:
        found = price_for(model, prices)
        return (found.input, found.output) if found is not None else None

    return price


def attachment_limits(settings: Settings) -> AttachmentLimits:
    """The caps on files attached to a message (YOKEBOT_ATTACHMENT_*)."""
    mb = 1 << 20
    return AttachmentLimits(max_files=settings.attachment_max_files,
                            max_bytes=int(settings.attachment_max_mb * mb),
                            max_inflated_bytes=int(settings.attachment_max_inflated_mb * mb),
                            max_image_bytes=int(settings.attachment_max_image_mb * mb),
                            max_chars=settings.attachment_max_chars,
                            fetch_seconds=settings.attachment_fetch_seconds)


def find_profile(profiles: Mapping[str, AgentProfile], agents_dir: Path, name: str) -> AgentProfile:
    try:
        return profiles[name]
    except KeyError:
        known = ", ".join(sorted(profiles)) or "none; set YOKEBOT_AGENTS_DIR to the folder with them"
        where = agents_dir.expanduser().resolve()
        raise UnknownAgent(f"No agent named {name!r} in {where} (known agents: {known}).") from None


def side_effecting(registry: Mapping[str, Tool[Any]], name: str) -> bool:
    """Does the tool change something outside the turn (the inbox records it before it runs)?"""
    tool = registry.get(name)
    return tool is not None and tool.side_effects  # an unknown name is refused by the executor: it runs nothing


def load_profiles(settings: Settings, registry: dict[str, Tool[Any]]) -> dict[str, AgentProfile]:
    profiles = ProfileLoader(settings.agents_dir, registry, platforms=platform_names(), ids=platform_id,
                             runbooks_dir=settings.runbooks_dir,
                             guardrails_file=settings.guardrails_file).load_all()
    for profile in profiles.values():
        refuse_unpriced_caps(settings, profile)
    return profiles


def refuse_unpriced_caps(settings: Settings, profile: AgentProfile) -> None:
    """A spend cap in USD needs a price for the agent's model: without one its calls would count as free."""
    model = profile.model or settings.model
    if price_for(model, settings.model_prices) is not None:
        return
    s = profile.spend
    which = ("spend.daily_usd" if s.daily_usd is not None else "spend.monthly_usd" if s.monthly_usd is not None
             else "YOKEBOT_SPEND_DAILY_USD" if settings.spend_daily_usd is not None else None)
    if which is not None:
        raise ProfileError(str(profile.path), f"{which} is set, but YOKEBOT_MODEL_PRICES has no price for this "
                           f"agent's model {model!r}; add one (USD per 1M tokens, input and output) or drop the cap")


def notify_target(profile: AgentProfile) -> str | None:
    """The agent's `notify.default`: where the notice of a spend cap reached goes."""
    policy = profile.tools.get("notify")
    return policy.default if isinstance(policy, NotifySpec) else None


def spend_caps(settings: Settings, profiles: Mapping[str, AgentProfile], store: SqlStore) -> SpendCaps | None:
    """The spend caps, when YOKEBOT_SPEND_DAILY_USD or any agent's `spend:` sets one (else nothing is checked)."""
    if settings.spend_daily_usd is None and not any(p.spend.any for p in profiles.values()):
        return None
    return SpendCaps(SqlSpendLedger(store), model_price(settings), daily_usd=settings.spend_daily_usd,
                     notify_target=notify_target, agents=profiles.values())


async def _engines(settings: Settings, *, runs_turns: bool) -> tuple[AsyncEngine, AsyncEngine | None]:
    """The engine of YOKEBOT_DATABASE_URL and, on PostgreSQL behind a pooler, the one of YOKEBOT_DATABASE_DIRECT_URL
    (None: the same engine serves both). A transaction pooler with no direct URL stops a process that runs turns
    (one sentence: the locks, the leader, the wake-ups and the writer's check would not hold)."""
    url, direct_url = settings.database_url, settings.database_direct_url
    if not is_postgres(url):
        return create_engine(url), None
    if direct_url is not None:
        direct = await probe(direct_url)
        problem = misconfigured("transaction", direct_url, direct_pooling=direct)
        if problem is not None:
            raise ConfigError(problem)
        return create_engine(url, pooled=True), create_engine(direct_url, pooled=direct != "direct",
                                                              server_pids=direct == "session")
    pooling = await probe(url)
    problem = misconfigured(pooling, None)
    if problem is not None and runs_turns:
        raise ConfigError(problem)
    return create_engine(url, pooled=pooling != "direct", server_pids=pooling == "session"), None


async def open_store(settings: Settings, *, migrate: bool = True, runs_turns: bool = False,
                     embedder: Embedder | None = None) -> tuple[AsyncEngine, SqlStore]:
    """The database, migrated, and the store over it (`embedder`: the memories' vectors; `embedder(...)`)."""
    try:
        engine, direct = await _engines(settings, runs_turns=runs_turns)
    except (OSError, SQLAlchemyError) as exc:
        raise _cannot_open(settings, exc) from None
    if migrate:
        try:
            await ensure_schema(engine, direct_url=settings.database_direct_url)
        except MigrationLockTimeout as exc:
            await engine.dispose()
            if direct is not None:
                await direct.dispose()
            raise ConfigError(f"Could not migrate the database: {exc}; if no other yokebot is starting, "
                              "its session may be stuck (see pg_locks), or run `yokebot db upgrade` alone.") from None
        except (OSError, SQLAlchemyError) as exc:
            await engine.dispose()
            if direct is not None:
                await direct.dispose()
            raise _cannot_open(settings, exc) from None
    return engine, SqlStore(engine, outage_seconds=settings.db_outage_seconds, direct=direct, embedder=embedder)


def embedder(settings: Settings, model: ChatModel) -> Embedder | None:
    """The memories' embeddings from the model endpoint's `/v1/embeddings` (YOKEBOT_EMBEDDING_MODEL; unset: the
    memories are ranked by keywords alone)."""
    return Embeddings(model, settings.embedding_model) if settings.embedding_model else None


def _cannot_open(settings: Settings, exc: BaseException) -> ConfigError:
    where = make_url(settings.database_url).render_as_string(hide_password=True)
    orig = (exc.orig if isinstance(exc, DBAPIError) else None) or exc  # the driver's own error
    first = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
    return ConfigError(f"Could not open the database at {where} ({first}); check YOKEBOT_DATABASE_URL.")


async def _learn_windows(settings: Settings, profiles: Mapping[str, AgentProfile], model: OpenAIChatModel) -> None:
    """A model the family table does not know, served by an OpenAI-compatible server (vLLM, llama.cpp): ask the
    server for its window once, rather than start compaction at the 8,192-token guess. OpenAI and the known
    families cost no round trip."""
    unknown = {p.model or settings.model for p in profiles.values() if not p.context_window} or {settings.model}
    if settings.openai_base_url and any(family_window(m) is None for m in unknown):
        learn_windows(await model.reported_windows())


async def build_app(
    settings: Settings,
    *,
    model: ChatModel | None = None,
    registry: dict[str, Tool[Any]] | None = None,
    clock: Callable[[], datetime] | None = None,
    metrics: bool = True,
    mcp_for: Collection[str] | None = None,
    fallback: Fallback | None = None,
    hooks: Sequence[TurnHooks] = (),
    sweep_dead: bool = False,
) -> App:
    """The composition root: every part of the app is made here, each given what it needs.

    `metrics=False` (`chat`, `ask`): no Prometheus registry, and prometheus-client is not imported.
    `mcp_for`: start only these agents' MCP servers (a terminal command talks to one agent; None: all).
    `fallback`: where `notify` shows alerts no adapter of this process posts (`chat`: the terminal).
    `hooks`: more turn hooks, after the recorder, the metrics and the traces (`yokebot eval`).
    `sweep_dead` (`yokebot run`, PostgreSQL): every renewal of this instance's lease also ends the turns left
    `running` by instances that are gone."""
    registry = registry if registry is not None else builtin_tools()
    profiles = load_profiles(settings, registry)
    if model is None:
        settings.require_model_endpoint()
    prometheus = _metrics() if metrics else None
    serving = profiles if mcp_for is None else {n: p for n, p in profiles.items() if n in mcp_for}
    mcp = mcp_manager(settings, serving, registry, prometheus)  # checks the environment its servers need
    redact = SecretRedactor([*settings.secret_values(), *(mcp.secret_values() if mcp else [])])  # MCP secrets too
    tracing = _tracing(settings, redact, prometheus)
    if mcp is not None:
        redact_also(mcp.secret_values())  # the log redacts the servers' ${VAR} values too
    ours: OpenAIChatModel | None = None
    if model is None:
        model = ours = OpenAIChatModel(api_key=settings.api_key(), base_url=settings.openai_base_url,
                                       timeout=settings.model_timeout_seconds, stream=settings.model_stream,
                                       headers=tracing.model_headers if tracing else None)
    engine, store = await open_store(settings, runs_turns=True, embedder=embedder(settings, model))
    await store.memory.open_index()  # with embeddings: the database's vector index, if it has one
    if ours is not None:
        await _learn_windows(settings, profiles, ours)
    retrying = RetryingModel(model, RetryPolicy(settings.model_max_attempts, settings.model_retry_base_seconds,
                                                settings.model_retry_max_wait_seconds))
    executor = ToolExecutor(
        registry,
        ToolPolicy(settings.tool_max_attempts, settings.tool_backoff_seconds, settings.tool_max_output_chars),
        redact=redact,
    )
    notifier = AdapterNotifier(hints(), fallback)
    prompts = (PromptBuilder(memory=store.memory, clock=clock, redact=redact) if clock else
               PromptBuilder(memory=store.memory, redact=redact))
    loop = ReActLoop(retrying, executor, prompts, settings.model, summaries=store, price=model_price(settings))
    turn_hooks = CompositeHooks(SqlRecorder(store), MetricsHooks(prometheus, model_price(settings)),  # rows, counts
                                *([tracing.hooks] if tracing else []), *hooks)
    # PostgreSQL may be shared by several instances: one turn per thread across them
    session_lock = (PgSessionLock.for_url(store.direct.url.render_as_string(hide_password=False))
                    if engine.dialect.name == "postgresql" else None)
    spend = spend_caps(settings, profiles, store)
    if spend is not None and prometheus is not None:
        prometheus.watch_spend(spend)  # yokebot_spend_ratio, read when scraped
    if prometheus is not None:  # every agent's model calls from 0: the first error shows in rate() and the alerts
        prometheus.expect_models({name: p.model or settings.model for name, p in profiles.items()})
    inbox = SqlInbox(store, lease_seconds=settings.inbox_lease_seconds, owner=store.owner)
    inbox_turns = InboxTurns(inbox, partial(side_effecting, registry), redact)
    # a decision resumes its parked turn on the instance that got it
    approvals = ApprovalDesk(ApprovalStore(engine), resume=inbox_turns.resume_parked)
    service = AgentService(store, loop, partial(find_profile, profiles, settings.agents_dir), hooks=turn_hooks,
                           notifier=notifier, memory=store.memory, session_lock=session_lock,
                           planner=PlanExecutor(loop), approvals=tracing.gate(approvals) if tracing else approvals,
                           notify_ledger=SqlNotifyLedger(engine),  # notify's limits hold across instances
                           attachment_limits=attachment_limits(settings), spend=spend)
    lease = None
    if engine.dialect.name == "postgresql":  # shared: other instances tell this one's turns from dead ones
        lease = InstanceLease(store, lease_seconds=settings.inbox_lease_seconds, sweeping=sweep_dead)
        lease.start()  # queued ahead of any turn row; no round trip here
    app = App(settings, engine, store, registry, profiles, notifier, service, model, inbox, inbox_turns, approvals,
              metrics=prometheus, session_lock=session_lock, mcp=mcp, lease=lease, tracing=tracing, spend=spend)
    if mcp is not None:
        try:
            await mcp.start()
        except BaseException:
            await app.close()
            raise
    return app


def _metrics() -> Metrics:
    from bot.observability.metrics import Metrics

    return Metrics()


def _tracing(settings: Settings, redact: SecretRedactor, metrics: Metrics | None) -> Tracing | None:
    """OTLP traces when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set; otherwise the SDK is not imported."""
    endpoint = settings.traces_endpoint()
    if endpoint is None:
        return None
    try:
        from bot.observability.otel import Tracing, exporter
    except ImportError:
        raise ConfigError("OTEL_EXPORTER_OTLP_ENDPOINT is set, but the OpenTelemetry SDK is not installed: "
                          "pip install 'yokebot[otel]' (or unset the variable).") from None
    from bot import __version__

    return Tracing(exporter(endpoint, settings.otel_protocol), redact, content=settings.otel_capture_content,
                   default_model=settings.model, server=settings.openai_base_url, version=__version__,
                   on_drop=metrics.otel_drop if metrics else None)


def mcp_manager(
    settings: Settings, profiles: dict[str, AgentProfile], registry: dict[str, Tool[Any]], metrics: Metrics | None
) -> McpManager | None:
    """The MCP servers of the profiles (not yet started), or None when no agent declares one."""
    if not any(p.mcp for p in profiles.values()):
        return None
    from bot.mcp.connection import McpTiming
    from bot.mcp.manager import McpManager

    timing = McpTiming(settings.mcp_startup_seconds, settings.mcp_backoff_base_seconds,
                       settings.mcp_backoff_max_seconds, settings.mcp_health_seconds,
                       settings.mcp_health_timeout_seconds)
    return McpManager.from_profiles(profiles, registry, timing, metrics.registry if metrics else None)


def build_platforms(app: App) -> list[Platform]:
    """The full adapter of every configured platform (bot/chat/platforms.py), not connected yet: registered
    with the notifier so `notify` can post to `slack:#name`, `discord:123`…, with their approval buttons."""
    return [_resumable(app, build_platform(entry, platform_parts(app), app.notifier, app.approvals))
            for entry in configured(app.settings)]


def _resumable(app: App, platform: Platform) -> Platform:
    """A turn parked on an approval is resumed by the instance that gets the decision: through this adapter."""
    app.inbox_turns.register(platform.platform, platform)
    return platform


def platform_parts(app: App) -> PlatformParts:
    from bot.facts import SqlCommandFacts

    return PlatformParts(app.settings, app.service, app.profiles, app.store, app.metrics, app.inbox_turns,
                         SqlConversationRefs(app.engine),
                         SqlCommandFacts(app.engine, app.approvals, app.settings.model_prices))


@asynccontextmanager
async def posting(app: App) -> AsyncGenerator[None]:
    """`chat`, `ask` and `schedule run`: a post-only adapter (Web API / REST: no Socket Mode, no gateway) for
    each platform whose token is set, so `notify` posts there as it does under `yokebot run`; the others go to
    the command's fallback (the terminal)."""
    posters = register_posting_adapters(app.notifier, platform_parts(app))
    try:
        yield
    finally:
        for poster in posters:
            await poster.stop()


def build_one(app: App, name: str) -> Platform | None:
    """One configured platform's adapter alone, as `build_platforms` builds it (not connected yet: `start()`
    it); None when Settings do not configure it. Tests and benchmarks drive an adapter this way."""
    entry = next((e for e in configured(app.settings) if e.name == name), None)
    if entry is None:
        return None
    return _resumable(app, build_platform(entry, platform_parts(app), app.notifier, app.approvals))
