"""What a broker is configured with, and who is asking (a session)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from logbroker.queue.publisher_flow import FlowLimits
from segments.group_commit import FsyncPolicy


@dataclass(frozen=True)
class BrokerConfig:
    data_dir: str = field(default_factory=lambda: os.path.join(os.getcwd(), "logbroker-data"))
    node_name: str = "logbroker@localhost"
    default_user: str = "guest"
    default_password: str = "guest"
    # RabbitMQ's loopback_users: these users may connect only from 127.0.0.0/8 or ::1.
    loopback_users: tuple[str, ...] = ("guest",)
    fsync_policy: FsyncPolicy = field(default_factory=FsyncPolicy)
    max_message_bytes: int = 128 * 1024 * 1024
    # Client connections this node accepts (RabbitMQ's connection_max); 0: no limit.
    max_connections: int = 0
    # None: 40% of the machine's RAM (RabbitMQ's vm_memory_high_watermark).
    memory_high_watermark_bytes: int | None = None
    disk_free_limit_bytes: int = 50_000_000
    # How long and how much settled (acked) history a queue keeps for replay, unless
    # its x-max-age / x-retention-bytes (or policy) says otherwise.
    retention_ms: int = 24 * 3600 * 1000
    retention_bytes: int = 1 << 30
    # When a queue holds its publishers back (logbroker.queue.publisher_flow); None:
    # never (the [flow] section of the config file).
    publisher_flow: FlowLimits | None = field(default_factory=FlowLimits)


@dataclass(frozen=True)
class Session:
    """The authenticated connection an operation comes from."""

    connection_id: str
    user: str
    vhost: str
