"""Small bounded-time helpers for pika BlockingConnection tests."""

from __future__ import annotations

import time
from collections.abc import Callable

from pika.adapters.blocking_connection import BlockingChannel, BlockingConnection
from pika.spec import Basic, BasicProperties

Delivery = tuple[Basic.Deliver, BasicProperties, bytes]


def consume_n(
    channel: BlockingChannel, queue: str, count: int, *, ack: bool = True, timeout_s: float = 5.0
) -> list[Delivery]:
    """Consume ``count`` messages from ``queue`` (acking them unless ``ack`` is False)."""
    got: list[Delivery] = []
    deadline = time.monotonic() + timeout_s
    for method, properties, body in channel.consume(queue, inactivity_timeout=0.2):
        if method is not None:
            got.append((method, properties, body))
            if ack:
                channel.basic_ack(method.delivery_tag)
        if len(got) >= count or time.monotonic() > deadline:
            break
    channel.cancel()
    return got


def get_all(channel: BlockingChannel, queue: str, limit: int = 1000) -> list[bytes]:
    """basic.get (auto-ack) until the queue is empty: the bodies, in order."""
    bodies: list[bytes] = []
    for _ in range(limit):
        method, _properties, body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            break
        bodies.append(body)
    return bodies


def pump_until(
    connections: list[BlockingConnection], done: Callable[[], bool], timeout_s: float = 5.0
) -> None:
    """Let every connection process its I/O until ``done()`` or the timeout."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached in time")
        for connection in connections:
            connection.process_data_events(time_limit=0.02)


def wait_for_count(channel: BlockingChannel, queue: str, count: int, timeout_s: float = 5.0) -> int:
    """Poll a passive queue.declare until ``queue`` holds ``count`` ready messages."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = channel.queue_declare(queue, passive=True).method.message_count
        if found == count or time.monotonic() > deadline:
            return int(found)
        time.sleep(0.02)
