"""What any node tells of a queue: its counts and its retained range, wherever it is led.

A queue's figures live with its log, on the node that leads it. A node that does
not lead the queue asks the leader over the cluster link (`q.counts`: ready
messages, consumers, first and end offset). When the leader is down or
unreachable, this node's in-sync copy still gives the retained range (its end is
the high watermark it last heard, a little behind the leader), and the counts
are unknown. So every node shows cluster-wide figures (`logbroker list queues`,
`GET /api/queues`, a consumer group's lag), not blanks for the queues it does not
lead. The link is asked for at most `LOOKUPS` queues at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from logbroker.broker import Broker
from logbroker.errors import BrokerError

LOOKUPS = 32


@dataclass(frozen=True, slots=True)
class QueueFigures:
    """A queue led elsewhere, as this node learned it; None: not known."""

    messages_ready: int | None
    consumers: int | None
    first_offset: int | None
    next_offset: int | None

    @property
    def leader_reachable(self) -> bool:
        return self.messages_ready is not None


async def remote_figures(broker: Broker, vhost: str, name: str) -> QueueFigures:
    """The figures of a queue this node does not lead (see the module doc)."""
    if broker.remote is not None:
        try:
            endpoint = broker.remote.endpoint(vhost, name)
            if endpoint is not None:
                stats = await endpoint.stats()
                return QueueFigures(stats.messages, stats.consumers, stats.first_offset,
                                    stats.end_offset)
        except BrokerError:
            pass  # its leader is down or unreachable: what this node holds, if anything
    view = broker.replay_view(vhost, name)
    if view is None:
        return QueueFigures(None, None, None, None)
    return QueueFigures(None, None, view.log_start_offset, view.readable_end)


async def queue_range(broker: Broker, vhost: str, name: str) -> tuple[int, int] | None:
    """(first offset, end offset) of the queue as seen from this node."""
    shell = broker.queue(vhost, name)
    if shell is not None:
        return shell.log_start_offset, shell.readable_end
    figures = await remote_figures(broker, vhost, name)
    if figures.first_offset is None or figures.next_offset is None:
        return None
    return figures.first_offset, figures.next_offset


async def remote_figures_of(broker: Broker, queues: Iterable[tuple[str, str]]
                            ) -> dict[tuple[str, str], QueueFigures]:
    """`remote_figures` of many queues, `LOOKUPS` at a time."""
    limit = asyncio.Semaphore(LOOKUPS)

    async def one(vhost: str, name: str) -> QueueFigures:
        async with limit:
            return await remote_figures(broker, vhost, name)

    keys = list(queues)
    found = await asyncio.gather(*(one(vhost, name) for vhost, name in keys))
    return dict(zip(keys, found, strict=True))
