"""The WebSocket parts for synchronous code: the async streams run on a private event loop
in a daemon thread, and these wrappers wait for them.

Ctrl-C in the calling thread interrupts a wait: the waiting coroutine is
cancelled and KeyboardInterrupt propagates.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Coroutine, Iterable
from dataclasses import dataclass, field, fields
from types import TracebackType
from typing import Any, TypeVar

from api.client.messages import OutgoingMessage, Properties, PublishResult, Record
from api.client.ws_publisher import AsyncPublisher
from api.client.ws_streams import AsyncConsumer, AsyncReplayStream, Delivery, ReceivedMessage

T = TypeVar("T")


class LoopThread:
    """An event loop in a daemon thread, started on first use."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="logbroker-client",
                                          daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._running_loop())
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    def close(self) -> None:
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(_cancel_tasks(), loop).result(5.0)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5.0)
        if not thread.is_alive():
            loop.close()


async def _cancel_tasks() -> None:
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


async def _next(iterator: AsyncIterator[T]) -> T | None:
    try:
        return await iterator.__anext__()
    except StopAsyncIteration:
        return None


@dataclass(frozen=True)
class SyncDelivery(ReceivedMessage):
    """A delivery to settle from synchronous code; False if its connection is gone."""

    delivery: Delivery | None = field(default=None, repr=False, compare=False)
    loop: LoopThread | None = field(default=None, repr=False, compare=False)

    @classmethod
    def wrap(cls, delivery: Delivery, loop: LoopThread) -> SyncDelivery:
        values = {f.name: getattr(delivery, f.name) for f in fields(ReceivedMessage)}
        return cls(**values, delivery=delivery, loop=loop)

    def ack(self, multiple: bool = False) -> bool:
        assert self.delivery is not None and self.loop is not None
        return self.loop.run(self.delivery.ack(multiple))

    def nack(self, multiple: bool = False, requeue: bool = True) -> bool:
        assert self.delivery is not None and self.loop is not None
        return self.loop.run(self.delivery.nack(multiple, requeue))

    def reject(self, requeue: bool = True) -> bool:
        assert self.delivery is not None and self.loop is not None
        return self.loop.run(self.delivery.reject(requeue))


class SyncConsumer:
    """Iterate for deliveries; use as `with client.consume(q) as consumer: for d in consumer:`."""

    def __init__(self, loop: LoopThread, consumer: AsyncConsumer) -> None:
        self._loop = loop
        self._async = consumer

    @property
    def consumer_tag(self) -> str | None:
        return self._async.consumer_tag

    def start(self) -> None:
        self._loop.run(self._async.start())

    def __enter__(self) -> SyncConsumer:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def __iter__(self) -> SyncConsumer:
        return self

    def __next__(self) -> SyncDelivery:
        delivery = self._loop.run(_next(self._async))
        if delivery is None:
            raise StopIteration
        return SyncDelivery.wrap(delivery, self._loop)

    def next(self, timeout: float | None = None) -> SyncDelivery | None:
        """The next delivery, or None if none came within `timeout` seconds or it ended."""
        try:
            delivery = self._loop.run(asyncio.wait_for(_next(self._async), timeout))
        except TimeoutError:
            return None
        return None if delivery is None else SyncDelivery.wrap(delivery, self._loop)

    def cancel(self) -> None:
        self._loop.run(self._async.cancel())

    def close(self) -> None:
        self._loop.run(self._async.close())


class SyncReplay:
    """A following replay for synchronous code: iterate for records."""

    def __init__(self, loop: LoopThread, stream: AsyncReplayStream) -> None:
        self._loop = loop
        self._async = stream

    @property
    def caught_up(self) -> bool:
        return self._async.caught_up

    def __enter__(self) -> SyncReplay:
        self._loop.run(self._async.start())
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def __iter__(self) -> SyncReplay:
        return self

    def __next__(self) -> Record:
        record = self._loop.run(_next(self._async))
        if record is None:
            raise StopIteration
        return record

    def close(self) -> None:
        self._loop.run(self._async.close())


class SyncPublisher:
    """The WebSocket publisher for synchronous code; `publish` returns a concurrent future."""

    def __init__(self, loop: LoopThread, publisher: AsyncPublisher) -> None:
        self._loop = loop
        self._async = publisher

    def __enter__(self) -> SyncPublisher:
        self._loop.run(self._async.open())
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def publish(self, exchange: str, routing_key: str, body: bytes | str,
                properties: Properties | None = None
                ) -> concurrent.futures.Future[PublishResult]:
        async def start() -> concurrent.futures.Future[PublishResult]:
            result: concurrent.futures.Future[PublishResult] = concurrent.futures.Future()
            future = await self._async.publish(exchange, routing_key, body, properties)
            future.add_done_callback(lambda done: _copy(done, result))
            return result

        return self._loop.run(start())

    def publish_many(self, messages: Iterable[OutgoingMessage], exchange: str = ""
                     ) -> list[PublishResult]:
        return self._loop.run(self._async.publish_many(list(messages), exchange))

    def flush(self) -> None:
        self._loop.run(self._async.flush())

    def close(self) -> None:
        self._loop.run(self._async.close())


def _copy(done: asyncio.Future[PublishResult],
          result: concurrent.futures.Future[PublishResult]) -> None:
    if done.cancelled():
        result.cancel()
    elif done.exception() is not None:
        result.set_exception(done.exception())
    else:
        result.set_result(done.result())
