"""Run an aiohttp application on 127.0.0.1:<ephemeral> in a background thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from aiohttp import web

T = TypeVar("T")


class LoopbackServer:
    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def call(self, coro: Awaitable[T]) -> T:
        fut: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]
        return fut.result(timeout=30)

    async def _start(self) -> None:
        self._runner = web.AppRunner(self.app, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server: Any = site._server
        self.port = server.sockets[0].getsockname()[1]

    def start(self) -> LoopbackServer:
        self._thread.start()
        self.call(self._start())
        return self

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        # requests still hanging (a scripted timeout) are cancelled, not left for the garbage collector
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def stop(self) -> None:
        self.call(self._shutdown())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()

    def submit(self, fn: Callable[[], Awaitable[Any]]) -> None:
        asyncio.run_coroutine_threadsafe(fn(), self.loop)
