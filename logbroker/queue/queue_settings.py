"""What a queue is, as its shell needs to know it (from its declaration and policy)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from logbroker.queue.fsync_policy import FsyncPolicy
from logbroker.queue.publisher_flow import FlowLimits
from logbroker.queue.queue_limits import Overflow, QueueLimits
from logbroker.queue.retention import Retention, max_age_ms

DEFAULT_FLOW = FlowLimits()


@dataclass(frozen=True)
class QueueSettings:
    vhost: str
    name: str
    durable: bool
    limits: QueueLimits
    message_ttl_ms: int | None = None
    max_priority: int | None = None
    single_active_consumer: bool = False
    fsync_policy: FsyncPolicy = field(default_factory=FsyncPolicy)
    dead_letter_exchange: str | None = None
    dead_letter_routing_key: str | None = None
    retention: Retention = field(default_factory=Retention)
    # How the queue holds its publishers back (publisher_flow); None: it never does.
    publisher_flow: FlowLimits | None = DEFAULT_FLOW


def settings_from(
    vhost: str, name: str, durable: bool, arguments: Mapping[str, Any],
    fsync_policy: FsyncPolicy, retention_ms: int | None, retention_bytes: int | None,
    publisher_flow: FlowLimits | None = DEFAULT_FLOW,
) -> QueueSettings:
    """A queue's settings from its effective arguments (declaration and policy) and the
    node's defaults."""
    dead_letter_exchange = arguments.get("x-dead-letter-exchange")
    limits = QueueLimits(
        max_length=arguments.get("x-max-length"),
        max_length_bytes=arguments.get("x-max-length-bytes"),
        overflow=Overflow(arguments.get("x-overflow", "drop-head")),
        dead_letter=dead_letter_exchange is not None,
        expires_ms=arguments.get("x-expires"),
    )
    return QueueSettings(
        vhost=vhost,
        name=name,
        durable=durable,
        limits=limits,
        message_ttl_ms=arguments.get("x-message-ttl"),
        max_priority=arguments.get("x-max-priority"),
        single_active_consumer=bool(arguments.get("x-single-active-consumer", False)),
        # Transient queues do not survive a restart, so their writes need no fsync.
        fsync_policy=fsync_policy if durable else FsyncPolicy.parse("never"),
        dead_letter_exchange=dead_letter_exchange,
        dead_letter_routing_key=arguments.get("x-dead-letter-routing-key"),
        retention=Retention(
            max_age_ms(arguments["x-max-age"]) if "x-max-age" in arguments
            else retention_ms,
            arguments.get("x-retention-bytes", retention_bytes),
        ),
        publisher_flow=publisher_flow,
    )
