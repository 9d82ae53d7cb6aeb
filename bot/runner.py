"""`yokebot run`: the HTTP server, the configured chat adapters and the scheduler, until SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable

from aiohttp import web

from bot.app import App, build_app
from bot.config import Settings

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


async def _nothing() -> None:
    return None


async def serve(settings: Settings, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    bot = await build_app(settings)
    http = web.Application()
    http.router.add_get("/healthz", healthz)
    runner = web.AppRunner(http)
    await runner.setup()
    site = web.TCPSite(runner, "0.0.0.0", settings.http_port)  # noqa: S104 - a server is meant to listen
    await site.start()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stop_scheduling = await start_scheduling(bot)
    log.info("yokebot is running: http on :%s, agents %s", settings.http_port, ", ".join(bot.profiles))
    try:
        await stop.wait()
    finally:
        log.info("stopping")
        await stop_scheduling()
        await runner.cleanup()
        await bot.close()
