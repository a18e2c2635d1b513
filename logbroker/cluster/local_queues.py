"""`LocalQueues`: the broker's queues on this node, as the cluster's helpers see them.

`QueueHost` (forwarded operations) and `QueueHandover` (moving a leadership)
act on the queues this node runs; they need the shells, whether this node
leads a queue, the wait for a queue it was just elected to lead, and (the
host) the publisher of already-routed messages: not the whole `Broker`, and
never the `ClusterNode` that holds it. `Broker` satisfies this Protocol.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from logbroker.message import Message
from logbroker.publishing import PublishResult
from logbroker.queue.queue_shell import QueueShell

__all__ = ["LocalQueues", "RoleChanges", "RoutedPublisher"]


class RoleChanges(Protocol):
    """The replica roles' changes under way (`ReplicaRoles`)."""

    async def moved(self, vhost: str, name: str, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until the queue's role change under way is done."""
        ...


class RoutedPublisher(Protocol):
    """`Publisher.start_routed`: messages another node already routed to shells here."""

    def start_routed(self, routed: Sequence[tuple[Message, list[QueueShell]]]
                     ) -> asyncio.Future[list[PublishResult]]: ...


class LocalQueues(Protocol):
    @property
    def roles(self) -> RoleChanges | None: ...

    @property
    def publisher(self) -> RoutedPublisher: ...

    def queue(self, vhost: str, name: str) -> QueueShell | None: ...

    def all_queues(self) -> list[QueueShell]: ...

    def leads_queue(self, vhost: str, name: str) -> bool: ...
