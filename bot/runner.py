"""`yokebot run`: the HTTP server, the configured chat adapters and the scheduler, until SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from aiohttp import web

from bot.app import App, build_app, build_discord, build_slack
from bot.config import Settings
from bot.observability.http import add_observability_routes

if TYPE_CHECKING:
    from bot.chat.discord_adapter import DiscordAdapter
    from bot.engine.profiles import AgentProfile

log = logging.getLogger(__name__)


async def healthz(_: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def start_discord(bot: App) -> DiscordAdapter | None:
    """Connect to Discord when DISCORD_BOT_TOKEN is set, and let `notify` post through it."""
    adapter = build_discord(bot)
    if adapter is not None:
        await adapter.start()
    return adapter


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
        bot = await build_app(settings)
        stack.push_async_callback(bot.close)
        http = web.Application()
        http.router.add_get("/healthz", healthz)
        add_observability_routes(http, bot)  # /readyz, /metrics
        slack = build_slack(bot)
        if slack is not None:
            slack.mount(http)  # HTTP Events mode: /slack/events; Socket Mode mounts nothing
        runner = web.AppRunner(http)
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        site = web.TCPSite(runner, "0.0.0.0", settings.http_port)  # noqa: S104 - a server is meant to listen
        await site.start()
        if slack is not None:
            await slack.start()
            stack.push_async_callback(slack.stop)  # drains turns in flight
        discord_adapter = await start_discord(bot)
        if discord_adapter is not None:
            stack.push_async_callback(discord_adapter.stop)
        stack.push_async_callback(await start_scheduling(bot))  # after the adapters: it posts through them
        log.info("yokebot is running: http on :%s, agents %s", settings.http_port, ", ".join(bot.profiles))
        log_isolation(bot.profiles)
        await stop.wait()
        log.info("stopping")


def log_isolation(profiles: Mapping[str, AgentProfile]) -> None:
    """Say, per agent with `shell`, whether its commands run in the OS sandbox (docs/sandbox.md)."""
    from bot.tools.isolation import shell_isolation

    for name, profile in profiles.items():
        if (line := shell_isolation(profile.tools)) is not None:
            level = logging.INFO if line.startswith("shell commands run isolated") else logging.WARNING
            log.log(level, "agent %s: %s", name, line)
