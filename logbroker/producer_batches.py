"""Transactional batch publish: a producer's batch becomes routable whole, at most once.

A producer (a Spark sink, any client that needs exactly-once publishing)
names itself with a producer id and numbers its batches with increasing
sequence numbers. It stages the messages of batch `seq` in parts (checked as
a publish is, kept in the batch's durable, replicated staging queue by
`BatchStaging`), then commits the parts it wants. The commit, at the node
that leads the staging queue:

1. answers "already committed" and publishes nothing when the metadata says
   `seq` was committed and applied (`producer_commands`);
2. reads the listed parts whole (the batch's other parts are discarded);
3. records the commit in the metadata (`CommitProducerBatch`: durable on a
   standalone node, Raft-replicated in a cluster) *before* anything is routed;
4. routes every message of the batch in one call of the publisher, so each
   target queue appends its share in one write: a consumer sees all of the
   batch's messages in its queue or none of them;
5. waits until every target queue holds its share durably, records
   `ProducerBatchApplied`, and deletes the staging queue.

If the committing node stops between 3 and 5, the batch stays *pending*: the
commit record exists, its messages may be in some queues and not others, and
the staging queue still holds the parts (on its replicas). A commit of the
same batch again, at whichever node leads the staging queue then, re-applies
it, skipping every target queue that already holds messages stamped with this
producer and sequence since the commit time (asked over the cluster link,
`q.holds_batch`, for queues led elsewhere). Every published message carries
the stamp as headers `x-producer-id` and `x-producer-seq`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from logbroker.batch_staging import (
    PRODUCER_ID_HEADER,
    PRODUCER_SEQ_HEADER,
    BatchStaging,
    OpenBatch,
)
from logbroker.message import Message
from logbroker.metadata import (
    CommitProducerBatch,
    MetadataState,
    ProducerBatchApplied,
    ProducerRecord,
)
from logbroker.metadata.commands import Command
from logbroker.publishing import Publisher, PublishResult
from logbroker.queue.queue_shell import QueueShell
from logbroker.queue.queue_type import RemoteQueues
from logbroker.staging_queues import BatchKey, UnknownParts, select_parts
from segments.clock import SYSTEM_CLOCK, Clock

STAMP_SCAN_BYTES = 1 << 20


StateSource = Callable[[], MetadataState]
RemoteLookup = Callable[[], RemoteQueues | None]
Apply = Callable[[Command], Awaitable[object]]


class BatchConflict(Exception):
    """The batch cannot take this request in its state (committed already, behind)."""


@dataclass(frozen=True)
class CommitOutcome:
    duplicate: bool  # committed before: nothing was published now
    messages: int  # messages of the batch
    unroutable: int  # of which reached no queue
    refused: int  # of which a queue refused (x-overflow reject-publish, max length)


class ProducerBatches:
    """The node's transactional batches; one lock per producer orders its commits."""

    def __init__(self, state: StateSource, apply: Apply, publisher: Publisher,
                 remote: RemoteLookup, staging: BatchStaging,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self._state = state
        self._clock = clock  # the commit time written into the metadata (wall)
        self._apply = apply
        self._publisher = publisher
        self._remote = remote
        self.staging = staging
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def stage(self, vhost: str, producer: str, seq: int, messages: Sequence[Message]
                    ) -> str:
        """Stage a part of batch `seq` (its messages already checked); its token."""
        record = self._state().producer(vhost, producer)
        # A pending batch takes parts again: its commit did not finish.
        if record is not None and record.pending_commit_ms(seq) is None and (
                seq in record.committed or seq < record.last_committed_seq):
            raise (BatchConflict(f"batch {seq} of producer '{producer}' is already committed")
                   if seq in record.committed else _behind(record, seq))
        return await self.staging.stage(vhost, producer, seq, messages)

    async def abort(self, vhost: str, producer: str, seq: int) -> int | None:
        """Discard batch `seq`'s staged parts; how many there were (None: not known here)."""
        record = self._state().producer(vhost, producer)
        if record is not None and seq in record.committed:
            raise BatchConflict(f"batch {seq} of producer '{producer}' is committed; "
                                "it cannot be aborted")
        count = self.staging.part_count(vhost, producer, seq)
        await self.staging.discard(vhost, producer, seq)
        return count

    def open_batches(self, vhost: str, producer: str) -> list[OpenBatch]:
        return self.staging.open_batches(vhost, producer)

    async def commit(self, vhost: str, producer: str, seq: int, tokens: Sequence[str]
                     ) -> CommitOutcome:
        lock = self._locks.setdefault((vhost, producer), asyncio.Lock())
        try:
            async with lock:
                return await self._commit(BatchKey(vhost, producer, seq), tokens)
        finally:
            if not lock.locked() and self._locks.get((vhost, producer)) is lock:
                del self._locks[(vhost, producer)]

    async def _commit(self, key: BatchKey, tokens: Sequence[str]) -> CommitOutcome:
        record = self._state().producer(key.vhost, key.producer)
        commit_ms = record.pending_commit_ms(key.seq) if record is not None else None
        if record is not None and key.seq in record.committed and commit_ms is None:
            await self.staging.discard(key.vhost, key.producer, key.seq)
            return CommitOutcome(duplicate=True, messages=0, unroutable=0, refused=0)
        if record is not None and key.seq < record.last_committed_seq and commit_ms is None:
            raise _behind(record, key.seq)
        parts = self.staging.parts(key.vhost, key.producer, key.seq) if tokens else {}
        if parts is None:
            raise UnknownParts(tokens)
        messages = select_parts(parts, tokens)
        skip: set[str] = set()
        if commit_ms is None:
            await self._apply(CommitProducerBatch(key.vhost, key.producer, key.seq,
                                                   self._clock.wall_ms()))
        else:  # a commit that did not finish: queues that have their share keep it
            skip = await self._queues_holding(key, messages, commit_ms)
        results = await self._publish(key.vhost, messages, skip)
        await self._apply(ProducerBatchApplied(key.vhost, key.producer, key.seq))
        await self.staging.discard(key.vhost, key.producer, key.seq)
        return CommitOutcome(
            duplicate=False, messages=len(messages),
            unroutable=sum(1 for result in results if not result.routed),
            refused=sum(1 for result in results if not result.confirmed))

    async def _publish(self, vhost: str, messages: list[Message], skip: set[str]
                       ) -> list[PublishResult]:
        if not skip:
            return await self._publisher.start_batch(vhost, messages)
        local, forwarded = [], []
        for message in messages:
            shells, names = self._publisher.route_all(vhost, message.exchange, message)
            local.append((message, [shell for shell in shells if shell.name not in skip]))
            forwarded.append([name for name in names if name not in skip])
        remote = self._remote()
        sent = [(m, names) for (m, _), names in zip(local, forwarded, strict=True) if names]
        confirmed = iter(await remote.publish(vhost, sent) if remote and sent else [])
        results = await self._publisher.start_routed(local)
        return [result._replace(confirmed=result.confirmed and next(confirmed))
                if names else result
                for result, names in zip(results, forwarded, strict=True)]

    async def _queues_holding(self, key: BatchKey, messages: list[Message], commit_ms: int
                              ) -> set[str]:
        """The target queues, here or led elsewhere, whose log has a message of this batch
        since its commit."""
        shells: dict[str, QueueShell] = {}
        elsewhere: set[str] = set()
        for message in messages:
            here, names = self._publisher.route_all(key.vhost, message.exchange, message)
            shells.update((shell.name, shell) for shell in here)
            elsewhere.update(names)
        holding = {name for name, shell in shells.items()
                   if holds_batch(shell, key.producer, key.seq, commit_ms)}
        remote = self._remote()
        for name in sorted(elsewhere):
            endpoint = remote.endpoint(key.vhost, name) if remote is not None else None
            if endpoint is not None and await endpoint.holds_batch(key.producer, key.seq,
                                                                   commit_ms):
                holding.add(name)
        return holding


def _behind(record: ProducerRecord, seq: int) -> BatchConflict:
    return BatchConflict(f"batch {seq} of producer '{record.name}' is behind its last "
                         f"committed batch {record.last_committed_seq}")


def holds_batch(shell: QueueShell, producer: str, seq: int, since_ms: int) -> bool:
    """Whether the queue's log has a message of batch (producer, seq) since `since_ms`:
    only what arrived after the batch's commit is read."""
    offset = shell.log.offset_for_timestamp(since_ms)
    end = shell.log.next_offset
    while offset < end:
        records = shell.log.read(offset, STAMP_SCAN_BYTES)
        if not records:
            return False
        for record in records:
            headers = Message.from_record(record).headers
            if (headers.get(PRODUCER_ID_HEADER) == producer
                    and headers.get(PRODUCER_SEQ_HEADER) == seq):
                return True
        offset = records[-1].offset + 1
    return False
