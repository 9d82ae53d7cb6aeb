"""`yokebot run`: the HTTP server, the configured chat adapters and the scheduler, until SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal

from aiohttp import web

from bot.app import build_app, build_slack
from bot.config import Settings

log = logging.getLogger(__name__)


async def healthz(_: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def serve(settings: Settings, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    bot = await build_app(settings)
    http = web.Application()
    http.router.add_get("/healthz", healthz)
    try:
        slack = build_slack(bot)
    except BaseException:
        await bot.close()
        raise
    if slack is not None:
        slack.mount(http)  # HTTP Events mode: /slack/events; Socket Mode mounts nothing
    runner = web.AppRunner(http)
    await runner.setup()
    site = web.TCPSite(runner, "0.0.0.0", settings.http_port)  # noqa: S104 - a server is meant to listen
    await site.start()
    if slack is not None:
        try:
            await slack.start()
        except BaseException:
            await runner.cleanup()
            await bot.close()
            raise
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("yokebot is running: http on :%s, agents %s", settings.http_port, ", ".join(bot.profiles))
    try:
        await stop.wait()
    finally:
        log.info("stopping")
        if slack is not None:
            await slack.stop()
        await runner.cleanup()
        await bot.close()
