"""Dead-lettering as RabbitMQ does it: the x-death history and cycle detection.

A dead-lettered message is republished to the queue's dead-letter exchange
with the dead-letter routing key (or its own routing key) and an updated
`x-death` header: a list of tables, newest first, one per (queue, reason),
each with `count`, `reason`, `queue`, `time`, `exchange`, `routing-keys` and,
if the message had a per-message TTL, `original-expiration` (the `expiration`
property itself is removed so the message does not expire again at once).
`x-first-death-*` are set once; `x-last-death-*` follow the latest death.

Cycle rule: a message that would reach a queue it already died in, with no
rejection anywhere in its history, is dropped for that queue: it would
otherwise loop forever (for example two queues whose TTLs dead-letter into
each other).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from logbroker.message import Message, Properties
from logbroker.queue.effects import DeadLetterReason


def dead_lettered(
    message: Message, queue: str, reason: DeadLetterReason, routing_key: str | None, now_ms: int
) -> tuple[Message, str]:
    """The message to republish and the routing key to republish it with."""
    headers: dict[str, Any] = dict(message.properties.headers or {})
    history = headers.get("x-death")
    deaths: list[dict[str, Any]] = (
        [dict(d) for d in history if isinstance(d, dict)] if isinstance(history, list) else []
    )
    existing = next((d for d in deaths
                     if d.get("queue") == queue and d.get("reason") == reason.value), None)
    if existing is not None:
        deaths.remove(existing)
        existing["count"] = int(existing.get("count", 1)) + 1
        existing["time"] = _timestamp(now_ms)
        entry = existing
    else:
        entry = {
            "count": 1,
            "reason": reason.value,
            "queue": queue,
            "time": _timestamp(now_ms),
            "exchange": message.exchange,
            "routing-keys": [message.routing_key],
        }
    expiration = message.properties.expiration
    if expiration:
        entry["original-expiration"] = expiration
    deaths.insert(0, entry)
    headers["x-death"] = deaths
    for prefix in ("x-first-death", "x-last-death"):
        if prefix == "x-last-death" or f"{prefix}-queue" not in headers:
            headers[f"{prefix}-queue"] = queue
            headers[f"{prefix}-reason"] = reason.value
            headers[f"{prefix}-exchange"] = message.exchange
    properties = _copy_properties(message.properties)
    properties.headers = headers
    properties.expiration = None
    target_key = routing_key if routing_key is not None else message.routing_key
    return message.with_properties(properties, timestamp_ms=now_ms), target_key


def drop_cycles(message: Message, target_queues: Iterable[str]) -> list[str]:
    """The target queues the dead-lettered `message` may go to (cycles removed)."""
    history = (message.properties.headers or {}).get("x-death")
    deaths = [d for d in history if isinstance(d, dict)] if isinstance(history, list) else []
    if any(d.get("reason") == DeadLetterReason.REJECTED.value for d in deaths):
        return list(target_queues)
    died_in = {d.get("queue") for d in deaths}
    return [queue for queue in target_queues if queue not in died_in]


def _timestamp(now_ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(now_ms // 1000, tz=datetime.UTC)


def _copy_properties(properties: Properties) -> Properties:
    copy = Properties()
    for name in properties.attributes():
        setattr(copy, name, getattr(properties, name))
    return copy
