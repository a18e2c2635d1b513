"""A TCP proxy on 127.0.0.1 that delays the start of a connection and each direction's bytes."""

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any


class DelayProxy:
    def __init__(
        self, target_port: int, *, connect_delay: float = 0.0, delays: tuple[float, float] = (0, 0)
    ) -> None:
        self._target_port = target_port
        self._connect_delay = connect_delay
        self._delays = delays  # (client -> target, target -> client), per chunk, order kept
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in self._writers:
            writer.transport.abort()
        await self._server.wait_closed()

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        self._spawn(self._connect(reader, writer))

    async def _connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(self._connect_delay)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target_port)
        self._writers.append(up_writer)
        self._spawn(self._pump(reader, up_writer, self._delays[0]))
        self._spawn(self._pump(up_reader, writer, self._delays[1]))

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float
    ) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def forward() -> None:
            while True:
                due, data = await queue.get()
                await asyncio.sleep(max(0.0, due - loop.time()))
                if not data:
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                    return
                writer.write(data)
                with contextlib.suppress(OSError):
                    await writer.drain()

        self._spawn(forward())
        while True:
            try:
                data = await reader.read(65536)
            except OSError:
                data = b""
            queue.put_nowait((loop.time() + delay, data))
            if not data:
                return
