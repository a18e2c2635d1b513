"""Handlers for transactional producers: what a committed batch leaves in the metadata.

A transactional batch publish (`logbroker.producer_batches`) commits batch
`seq` of producer `producer` by proposing `CommitProducerBatch` *before* it
routes the batch's messages, and `ProducerBatchApplied` once they are all in
their queues. Kept here, so durable on a standalone node and replicated by
Raft in a cluster:

- `committed`: the last `COMMITTED_WINDOW` committed sequence numbers, so a
  commit sent again (a client that lost the answer, a Spark batch re-run after
  its driver died) is answered "already committed" and publishes nothing;
- `pending`: committed batches not yet known to be in their queues (the
  committing node stopped in between). A later commit of the same batch
  finishes it instead of starting it (see `producer_batches`).

Invariants: sequence numbers commit in increasing order per producer
(`last_committed_seq` only grows; a commit below it that is not in the window
is refused 406); a commit already in the window changes nothing, so two
nodes proposing the same commit concurrently record it once; at most
`MAX_PRODUCERS` records per vhost: the one that committed least recently and
has nothing pending is forgotten first, deterministically from the commands'
`commit_ms`.
"""

from __future__ import annotations

from collections.abc import Callable

from logbroker.metadata.commands import CommitProducerBatch, ProducerBatchApplied
from logbroker.metadata.errors import precondition_failed
from logbroker.metadata.events import Event, ProducerChanged
from logbroker.metadata.records import ProducerRecord
from logbroker.metadata.state_data import StateData, VhostData

COMMITTED_WINDOW = 64
MAX_PRODUCERS = 10_000
MAX_PRODUCER_NAME_BYTES = 255


def check_producer_name(name: str) -> None:
    try:
        size = len(name.encode())
    except UnicodeEncodeError:
        size = 0
    if not 0 < size <= MAX_PRODUCER_NAME_BYTES:
        raise precondition_failed(
            f"a producer id is 1 to {MAX_PRODUCER_NAME_BYTES} bytes of UTF-8 text")


def plan_commit_producer_batch(data: StateData, command: CommitProducerBatch
                               ) -> Callable[[], list[Event]]:
    vhost = data.vhost(command.vhost)
    check_producer_name(command.producer)
    if command.seq < 0:
        raise precondition_failed("a batch sequence number must not be negative")
    record = vhost.producers.get(command.producer)
    if record is not None and command.seq in record.committed:
        return list  # committed already: nothing changes
    if record is not None and command.seq < record.last_committed_seq:
        raise precondition_failed(
            f"batch {command.seq} of producer '{command.producer}' is behind its last "
            f"committed batch {record.last_committed_seq} and was never committed")
    committed = (*(record.committed if record else ()), command.seq)[-COMMITTED_WINDOW:]
    pending = (*(record.pending if record else ()), (command.seq, command.commit_ms))
    new = ProducerRecord(command.vhost, command.producer, command.seq, committed, pending,
                         command.commit_ms)

    def run() -> list[Event]:
        events: list[Event] = []
        if record is None and len(vhost.producers) >= MAX_PRODUCERS:
            events.extend(_forget_one(vhost))
        vhost.producers[new.name] = new
        events.append(ProducerChanged(command.vhost, new.name, new))
        return events

    return run


def plan_producer_batch_applied(data: StateData, command: ProducerBatchApplied
                                ) -> Callable[[], list[Event]]:
    vhost = data.vhost(command.vhost)
    record = vhost.producers.get(command.producer)
    if record is None or record.pending_commit_ms(command.seq) is None:
        return list
    pending = tuple(item for item in record.pending if item[0] != command.seq)
    new = ProducerRecord(record.vhost, record.name, record.last_committed_seq,
                         record.committed, pending, record.last_commit_ms)

    def run() -> list[Event]:
        vhost.producers[new.name] = new
        return [ProducerChanged(command.vhost, new.name, new)]

    return run


def _forget_one(vhost: VhostData) -> list[Event]:
    idle = [record for record in vhost.producers.values() if not record.pending]
    if not idle:
        return []
    oldest = min(idle, key=lambda record: record.last_commit_ms)
    del vhost.producers[oldest.name]
    return [ProducerChanged(vhost.name, oldest.name, None)]
