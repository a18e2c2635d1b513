"""What a queue is, as its shell needs to know it (from its declaration and policy)."""

from __future__ import annotations

from dataclasses import dataclass, field

from logbroker.queue.queue_core import QueueLimits
from logbroker.queue.retention import Retention
from segments.group_commit import FsyncPolicy


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
