"""Consumer groups as the REST API asks for them: commit, delete, and where each queue stands.

Committing and deleting check the user's `read` permission on every queue
involved (committing names queues in its request; deleting drops the
positions on every queue the group holds), then propose the command through
the broker, so it is durable on a standalone node and Raft-replicated in a
cluster (`logbroker.metadata.group_commands` decides).

A group's lag needs each queue's retained range and end, which live with the
queue's log, not in the metadata: `logbroker.queue_figures.queue_range` finds
them on any node (null when not known). The cluster link is asked for at most
`RANGE_LOOKUPS` queues at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from logbroker.broker import Broker
from logbroker.broker_config import Session
from logbroker.errors import NOT_FOUND, BrokerError
from logbroker.metadata import CommitGroupOffsets, ConsumerGroupRecord, DeleteConsumerGroup
from logbroker.queue_figures import queue_range

RANGE_LOOKUPS = 32


@dataclass(frozen=True, slots=True)
class QueuePosition:
    """Where a group stands on one queue; the range fields are None when not known."""

    queue: str
    committed_offset: int
    first_offset: int | None
    end_offset: int | None

    @property
    def lag(self) -> int | None:
        """Records the group has still to read: from its position (or the oldest record
        retention kept, if it fell behind that) to the queue's end."""
        if self.first_offset is None or self.end_offset is None:
            return None
        return max(0, self.end_offset - max(self.committed_offset, self.first_offset))


async def commit_offsets(broker: Broker, session: Session, group: str,
                         offsets: Mapping[str, int]) -> None:
    for queue in offsets:
        broker.access.check(session, "queue", queue, "read")
    await broker.apply(CommitGroupOffsets(session.vhost, group, dict(offsets)))


async def delete_group(broker: Broker, session: Session, group: str) -> None:
    record = existing_group(broker, session.vhost, group)
    for queue in record.offsets:
        broker.access.check(session, "queue", queue, "read")
    await broker.apply(DeleteConsumerGroup(session.vhost, group))


def existing_group(broker: Broker, vhost: str, group: str) -> ConsumerGroupRecord:
    record = broker.state.consumer_group(vhost, group)
    if record is None:
        raise BrokerError(NOT_FOUND, f"no consumer group '{group}' in vhost '{vhost}'")
    return record


async def positions(broker: Broker, group: ConsumerGroupRecord) -> list[QueuePosition]:
    """The group's position on each of its queues, in commit order."""
    limit = asyncio.Semaphore(RANGE_LOOKUPS)

    async def one(queue: str, committed: int) -> QueuePosition:
        async with limit:
            found = await queue_range(broker, group.vhost, queue)
        first, end = found if found is not None else (None, None)
        return QueuePosition(queue, committed, first, end)

    return list(await asyncio.gather(*(one(queue, offset)
                                       for queue, offset in group.offsets.items())))
