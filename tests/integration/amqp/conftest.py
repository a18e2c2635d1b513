"""A real broker on 127.0.0.1 for client-library tests.

The goal is a broker in a child process (``logbroker serve``); until that
entry point settles, ``amqp_broker`` runs ``Broker.open`` + ``start_amqp_server``
in a background thread with its own event loop, so the clients under test
(pika's BlockingConnection, aio-pika, kombu) still talk to it over real TCP
sockets. The fixture yields the port and tears everything down, bounded in
time, after the test.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pika
import pytest

from api.amqp.server import start_amqp_server, stop_amqp_server
from logbroker.broker import Broker
from logbroker.broker_config import BrokerConfig

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0


class BrokerThread:
    """A broker and its AMQP listener, served by an event loop in a daemon thread."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = 0
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="amqp-broker", daemon=True)
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._broker: Broker | None = None
        self._server: asyncio.Server | None = None

    @property
    def broker(self) -> Broker:
        assert self._broker is not None
        return self._broker

    def call(self, function: Callable[[], object]) -> None:
        """Run ``function`` on the broker's loop and wait for it."""
        async def run() -> None:
            function()

        asyncio.run_coroutine_threadsafe(run(), self.loop).result(START_TIMEOUT_S)

    def start(self) -> None:
        self._thread.start()
        if not self._started.wait(START_TIMEOUT_S):
            raise TimeoutError("the broker did not start in time")
        if self._error is not None:
            raise RuntimeError("the broker failed to start") from self._error

    def stop(self) -> None:
        if self._thread.is_alive():
            stopping = asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop)
            try:
                stopping.result(STOP_TIMEOUT_S)
            finally:
                self.loop.call_soon_threadsafe(self.loop.stop)
                self._thread.join(STOP_TIMEOUT_S)
        if not self._thread.is_alive():
            self.loop.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._startup())
        except BaseException as err:  # reported to the test thread by start()
            self._error = err
            self._started.set()
            return
        self._started.set()
        self.loop.run_forever()

    async def _startup(self) -> None:
        self._broker = Broker.open(BrokerConfig(data_dir=str(self.data_dir)))
        self._server = await start_amqp_server(self._broker, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _shutdown(self) -> None:
        if self._server is not None:
            await stop_amqp_server(self._server)
        if self._broker is not None:
            await self._broker.close()


@pytest.fixture
def broker_thread(tmp_path: Path) -> Iterator[BrokerThread]:
    """A fresh broker (data in ``tmp_path``) listening on 127.0.0.1, and its loop."""
    broker = BrokerThread(tmp_path / "data")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def amqp_broker(broker_thread: BrokerThread) -> int:
    """The port of a fresh broker listening on 127.0.0.1."""
    return broker_thread.port


@pytest.fixture
def connect(amqp_broker: int) -> Iterator[Callable[[], pika.BlockingConnection]]:
    """Opens pika BlockingConnections to the broker; closes them after the test."""
    opened: list[pika.BlockingConnection] = []

    def open_connection() -> pika.BlockingConnection:
        parameters = pika.ConnectionParameters(
            "127.0.0.1", amqp_broker, socket_timeout=5, blocked_connection_timeout=5,
            connection_attempts=1,
        )
        connection = pika.BlockingConnection(parameters)
        opened.append(connection)
        return connection

    yield open_connection
    for connection in opened:
        if connection.is_open:
            connection.close()
