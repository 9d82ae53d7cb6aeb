"""`yokebot run`: the HTTP server, the configured chat platforms and the scheduler, until SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from aiohttp import web

from bot.alerts.wiring import build_alerts
from bot.app import App, build_app, build_platforms
from bot.chat.core.inbox_turns import Recovery, Resumable
from bot.config import Settings
from bot.engine.model import preload
from bot.gc_freeze import freeze_startup_objects
from bot.observability.http import add_alert_routes, add_observability_routes
from bot.store.filelock import lock_sqlite_for_run

if TYPE_CHECKING:
    from bot.engine.spec import AgentProfile

log = logging.getLogger(__name__)


async def healthz(_: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def start_scheduling(bot: App) -> Callable[[], Awaitable[None]]:
    """Start the scheduler (leader election, profile and runtime schedules); returns its stop function."""
    if not bot.settings.scheduler_enabled:
        log.info("scheduler disabled (YOKEBOT_SCHEDULER_ENABLED=false)")
        return _nothing
    from bot.scheduling.setup import build_scheduler

    scheduler = await build_scheduler(bot)
    await scheduler.start()
    return scheduler.stop


async def start_recovery(bot: App, adapters: Mapping[str, Resumable], *, alone: bool) -> Callable[[], Awaitable[None]]:
    """Keep this instance's inbox leases alive, and take over the events of dead instances: at once (all open
    ones when this process is alone on a SQLite file), then every half lease. Returns its stop function."""
    bot.inbox.start_heartbeat()
    for name, adapter in adapters.items():  # alerts too: a decision resumes a parked turn through its adapter
        bot.inbox_turns.register(name, adapter)
    recovery = Recovery(bot.inbox, bot.inbox_turns, adapters, bot.settings.inbox_lease_seconds / 2, alone=alone,
                        gone=bot.lease,  # PostgreSQL: a predecessor on this host known dead is not waited for
                        watch=bot.approvals.watch)
    await recovery.start()
    return recovery.stop


async def sweep_dead_turns(bot: App) -> None:
    """PostgreSQL: end the turns left `running` by processes that are gone (a killed `yokebot ask`, a scheduled
    turn cut by a crash), now and at every renewal of this instance's own lease (`build_app(sweep_dead=True)`)."""
    if bot.lease is None:
        return
    try:
        await bot.lease.sweep()
    except Exception as exc:  # the next renewal tries again
        log.warning("could not look for turns of stopped instances (%s)", type(exc).__name__)


async def _nothing() -> None:
    return None


def _restore_signals(loop: asyncio.AbstractEventLoop) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(sig)


async def serve(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Run until `stop` is set (SIGTERM/SIGINT set it); everything started is stopped in reverse order."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # first: a SIGTERM during start-up also stops cleanly
        loop.add_signal_handler(sig, stop.set)
    async with AsyncExitStack() as stack:
        stack.callback(_restore_signals, loop)
        run_lock = lock_sqlite_for_run(settings.database_url)  # SQLite: one `yokebot run` per file
        if run_lock is not None:
            stack.callback(run_lock.release)
        bot = await build_app(settings, sweep_dead=True)
        await sweep_dead_turns(bot)
        preload()  # the model SDK loads in a thread while the adapters connect, not in the first turn
        stack.push_async_callback(bot.close)
        http = web.Application()
        http.router.add_get("/healthz", healthz)
        metrics_token = settings.metrics_token.get_secret_value() if settings.metrics_token is not None else None
        add_observability_routes(http, bot, token=metrics_token,  # /readyz, /metrics
                                 lease_seconds=settings.inbox_lease_seconds)
        platforms = build_platforms(bot)  # every configured one (bot/chat/platforms.py)
        alerts = build_alerts(bot, platforms)  # YOKEBOT_WEBHOOK_TOKEN set: /hooks/alertmanager, /hooks/grafana
        add_alert_routes(http, alerts.webhooks if alerts is not None else None)
        for platform in platforms:
            platform.mount(http)  # Slack's HTTP Events mode: /slack/events; the others mount nothing
        runner = web.AppRunner(http)
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        site = web.TCPSite(runner, settings.http_host, settings.http_port)
        await site.start()
        resumable: dict[str, Resumable] = {}
        for platform in platforms:
            stack.push_async_callback(platform.stop)  # drains turns in flight, disconnects
            await platform.identify()  # REST only: enough to answer the events recovery takes over
            resumable[platform.platform] = platform
        if alerts is not None:
            alerts.attach(resumable)  # its investigations recover like chat turns
        if resumable:
            # before events come in: alone on a SQLite file, every `running` turn is a dead one
            stack.push_async_callback(await start_recovery(bot, resumable, alone=run_lock is not None))
        for platform in platforms:
            await platform.start()
        if alerts is not None:  # once the adapters can post
            stack.push_async_callback(await alerts.start(alone=run_lock is not None))
        stack.push_async_callback(await start_scheduling(bot))  # after the adapters: it posts through them
        log.info("yokebot is running: http on %s:%s, agents %s", settings.http_host, settings.http_port,
                 ", ".join(bot.profiles))
        log_isolation(bot.profiles)
        with contextlib.suppress(Exception):  # a broken SDK install says so at the first model call
            await asyncio.wait_for(asyncio.wrap_future(preload()), timeout=30)
        freeze_startup_objects()  # everything is loaded: full GC collections no longer walk the libraries
        await stop.wait()
        log.info("stopping")


def log_isolation(profiles: Mapping[str, AgentProfile]) -> None:
    """Say, per agent with `shell`, whether its commands run in the OS sandbox (docs/sandbox.md)."""
    from bot.tools.shell import shell_isolation

    for name, profile in profiles.items():
        if (line := shell_isolation(profile.tools)) is not None:
            level = logging.INFO if line.startswith("shell commands run isolated") else logging.WARNING
            log.log(level, "agent %s: %s", name, line)
