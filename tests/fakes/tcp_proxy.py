"""A TCP proxy on 127.0.0.1 in front of a real server (the shared PostgreSQL), that a test can take down and
bring back: `pause()` cuts every open connection and refuses new ones (accepted, then closed at once, as
a server that went away), `resume()` forwards again. A database outage without stopping the shared server."""

from __future__ import annotations

import asyncio
import contextlib
import threading


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.down = False
        self.refused = 0  # connections refused while down
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._cut_after: bytes | None = None  # the next client bytes holding this go through, then both ends close
        self._forward = True
        self._hold = False
        self._down_on: bytes | None = None  # the next client bytes holding this never go through: the proxy goes down
        self._stopped: asyncio.Event | None = None  # made on the proxy's loop; set when it stops
        self.cuts = 0

    def start(self) -> TcpProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    async def _start(self) -> None:
        self._stopped = asyncio.Event()
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def pause(self) -> None:
        asyncio.run_coroutine_threadsafe(self._cut(), self._loop).result(timeout=10)

    def resume(self) -> None:
        self.down = False

    def cut_after(self, marker: bytes, *, forward: bool = True, hold: bool = False) -> None:
        """Once: forward the client's next bytes that hold `marker` (a `COMMIT`, say) to the server, then close
        the connection before the server's answer comes back, as a network that fails at that moment
        (`forward=False`: they never reach the server). `hold`: the server's end stays open (until the proxy
        stops), as a dead network leaves it: the server does not see the client go."""
        self._cut_after, self._forward, self._hold = marker, forward, hold

    def down_on(self, marker: bytes) -> None:
        """Once: when a client sends bytes holding `marker` (a statement's text), they are not forwarded and
        the proxy goes down at that moment, as `pause()` (until `resume()`): an outage that begins exactly
        when that statement is sent."""
        self._down_on = marker

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    async def _cut(self) -> None:
        self.down = True
        for writer in list(self._open):
            writer.close()
        self._open.clear()

    async def _close(self) -> None:
        if self._stopped is not None:
            self._stopped.set()
        await self._cut()
        if self._server is not None:
            self._server.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.down:
            self.refused += 1
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._open.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer, client=writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    client: asyncio.StreamWriter | None = None) -> None:
        try:
            while data := await reader.read(65536):
                if self.down:
                    break
                if client is not None and self._down_on is not None and self._down_on in data:
                    self._down_on = None
                    await self._cut()
                    break
                cut = client is not None and self._cut_after is not None and self._cut_after in data
                if cut and self._forward:
                    writer.write(data)
                    await writer.drain()
                if cut and client is not None:
                    self._cut_after = None
                    self.cuts += 1
                    client.close()  # the client never hears the answer to what it just sent
                    if self._hold and self._stopped is not None:
                        self._open.discard(writer)
                        await self._stopped.wait()  # the server's end stays open: it never sees the client go
                    elif self._forward:
                        await asyncio.sleep(0.2)  # the server reads it before it sees the connection go
                    break  # the finally closes the server's end
                writer.write(data)
                await writer.drain()
        except (OSError, RuntimeError):
            pass
        finally:
            self._open.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()
