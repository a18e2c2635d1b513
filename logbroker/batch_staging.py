"""`BatchStaging`: staged parts kept in the batch's staging queue, durable and replicated.

The I/O beside `staging_queues` (which names things and decides). A stage
declares the batch's staging queue when it is the first (durable, replicated
on up to three nodes in a cluster, `x-expires` so an abandoned batch goes away,
`x-max-length-bytes` with `reject-publish` so a batch stays within what one
commit can route), then publishes the part's messages into it with confirms:
the default exchange routes them there, and their own exchange and routing key
travel in headers. A stage is answered once the part is confirmed, that is on
disk on every in-sync replica, so it survives the loss of the node that took it.

Reading a batch's parts back needs the queue's log: only the node that leads the
staging queue reads it (`NotLeader` names the one that does).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from logbroker.message import Message, Properties, encode_properties, stored_fields
from logbroker.metadata import DeclareQueue, DeleteQueue, MetadataState
from logbroker.metadata.commands import Command
from logbroker.publishing import Publisher
from logbroker.queue.queue_shell import QueueShell
from logbroker.staging_queues import (
    EXCHANGE_HEADER,
    PART_HEADER,
    ROUTING_KEY_HEADER,
    STAGING_HEADERS,
    StagingLimits,
    is_staging_queue,
    part_token,
    staging_queue_name,
)
from segments.record_batch import LogRecord

PRODUCER_ID_HEADER = "x-producer-id"
PRODUCER_SEQ_HEADER = "x-producer-seq"
READ_CHUNK_BYTES = 4 << 20
Placer = Callable[[str, str, Mapping[str, Any], bool], tuple[str | None, tuple[str, ...]]]


class StagingRefused(Exception):
    """Nothing was staged: the batch is too large (`too_large`) or the node cannot."""

    def __init__(self, text: str, too_large: bool) -> None:
        super().__init__(text)
        self.text = text
        self.too_large = too_large


class NotLeader(Exception):
    """The batch's staging queue is led by another node (`node`; None: none now)."""

    def __init__(self, node: str | None) -> None:
        super().__init__(node or "no node")
        self.node = node


@dataclass(frozen=True)
class OpenBatch:
    """A batch with a staging queue; its size is known on the node that leads it."""

    seq: int
    messages: int | None
    size_bytes: int | None


class BatchStaging:
    def __init__(self, state: Callable[[], MetadataState],
                 apply: Callable[[Command], Awaitable[object]], publisher: Publisher,
                 local_queue: Callable[[str, str], QueueShell | None], place: Placer,
                 released: Callable[[str, str], Awaitable[None]],
                 limits: StagingLimits | None = None) -> None:
        self._state = state
        self._apply = apply
        self._publisher = publisher
        self._local_queue = local_queue
        self._place = place
        self._released = released
        self.limits = limits or StagingLimits()

    async def stage(self, vhost: str, producer: str, seq: int, messages: Sequence[Message]
                    ) -> str:
        """Stage one part (its messages checked as publishes); its token, once durable."""
        name = staging_queue_name(producer, seq)
        await self._declare(vhost, name)
        token = part_token(os.urandom(12).hex(), len(messages))
        results = await self._publisher.start_batch(
            vhost, staged(messages, producer, seq, token, name))
        refused = next((r for r in results if not (r.routed and r.confirmed)), None)
        if refused is not None:
            # The staging queue refuses past x-max-length-bytes (reject-publish).
            too_large = refused.routed and "is full" in refused.reason
            reason = refused.reason or "not routed"
            raise StagingRefused(
                f"batch {seq} of producer '{producer}' would pass "
                f"{self.limits.max_batch_bytes} bytes staged; commit smaller batches"
                if too_large else f"the part could not be staged: {reason}", too_large)
        return token

    async def _declare(self, vhost: str, name: str) -> None:
        state = self._state()
        if state.queue(vhost, name) is not None:
            return
        await self._released(vhost, name)  # an aborted instance of it may still be closing
        if sum(1 for q in state.queues(vhost) if is_staging_queue(q.name)) >= (
                self.limits.max_open_batches):
            raise StagingRefused(f"vhost '{vhost}' has {self.limits.max_open_batches} "
                                 "batches open; commit or abort some first", too_large=False)
        arguments = {"x-queue-replicas": 3, "x-expires": self.limits.timeout_ms,
                     "x-max-length-bytes": self.limits.max_batch_bytes,
                     "x-overflow": "reject-publish"}
        leader, members = self._place(vhost, name, arguments, False)
        await self._apply(DeclareQueue(vhost, name, durable=True, arguments=arguments,
                                       server_named=True, leader_node=leader,
                                       members=members))

    def parts(self, vhost: str, producer: str, seq: int) -> dict[str, list[Message]] | None:
        """The batch's staged parts by token, as published (None: no staging queue).
        Raises NotLeader when another node leads the staging queue."""
        name = staging_queue_name(producer, seq)
        record = self._state().queue(vhost, name)
        if record is None:
            return None
        shell = self._local_queue(vhost, name)
        if shell is None:
            raise NotLeader(record.leader_node)
        return read_parts(shell)

    def part_count(self, vhost: str, producer: str, seq: int) -> int | None:
        """How many parts the batch has staged (None: not known on this node, which does
        not lead its staging queue)."""
        name = staging_queue_name(producer, seq)
        if self._state().queue(vhost, name) is None:
            return 0
        shell = self._local_queue(vhost, name)
        return len(part_tokens(shell)) if shell is not None else None

    async def discard(self, vhost: str, producer: str, seq: int) -> None:
        name = staging_queue_name(producer, seq)
        if self._state().queue(vhost, name) is not None:
            await self._apply(DeleteQueue(vhost, name))

    def open_batches(self, vhost: str, producer: str) -> list[OpenBatch]:
        prefix = staging_queue_name(producer, 0)[:-1]
        out = []
        for record in self._state().queues(vhost):
            if record.name.startswith(prefix) and record.name[len(prefix):].isdigit():
                shell = self._local_queue(vhost, record.name)
                out.append(OpenBatch(
                    int(record.name[len(prefix):]),
                    shell.core.message_count if shell is not None else None,
                    shell.log.size_bytes if shell is not None else None))
        return sorted(out, key=lambda batch: batch.seq)


def staged(messages: Sequence[Message], producer: str, seq: int, token: str, queue: str
           ) -> list[Message]:
    """The part's messages as the staging queue keeps them: addressed to it, with the
    batch's stamp, the part's token and their own exchange and routing key in headers.
    Messages that shared properties and address share the staged ones, encoded once."""
    made: dict[tuple[int, str, str], tuple[Properties, bytes]] = {}
    out = []
    for message in messages:
        key = (id(message.properties), message.exchange, message.routing_key)
        found = made.get(key)
        if found is None:
            properties = copy.copy(message.properties)  # shared with other messages
            properties.headers = {
                **(message.properties.headers or {}), PRODUCER_ID_HEADER: producer,
                PRODUCER_SEQ_HEADER: seq, PART_HEADER: token,
                EXCHANGE_HEADER: message.exchange, ROUTING_KEY_HEADER: message.routing_key}
            found = made[key] = (properties, encode_properties(properties))
        out.append(Message("", queue, message.body, found[0], message.timestamp_ms,
                           _encoded_properties=found[1]))
    return out


def read_parts(shell: QueueShell) -> dict[str, list[Message]]:
    """Every part in the staging queue's log, by token, each message addressed and
    stamped as the producer published it (the staging headers taken off)."""
    parts: dict[str, list[Message]] = {}
    for token, model, record in _staged_records(shell):
        parts.setdefault(token, []).append(Message(
            model.exchange, model.routing_key, record.value, model.properties,
            _encoded_properties=model.encoded_properties()))
    return parts


def part_tokens(shell: QueueShell) -> set[str]:
    """The tokens of the parts in the staging queue's log (no message is rebuilt)."""
    return {token for token, _, _ in _staged_records(shell)}


def _staged_records(shell: QueueShell) -> Iterator[tuple[str, Message, LogRecord]]:
    """(part token, the message's address and properties as published, record) for every
    record of the staging queue; records that share properties share one decode."""
    restored: dict[bytes, tuple[str, Message]] = {}
    offset, end = shell.log_start_offset, shell.readable_end
    while offset < end:
        records = shell.read_log(offset, READ_CHUNK_BYTES)
        if not records:
            break
        for record in records:
            if record.offset >= end:
                break
            encoded = stored_fields(record)[2]
            template = restored.get(encoded)
            if template is None:
                template = restored[encoded] = _restore(Message.from_record(record))
            yield template[0], template[1], record
        offset = records[-1].offset + 1


def _restore(stored: Message) -> tuple[str, Message]:
    headers = dict(stored.properties.headers or {})
    token = str(headers.get(PART_HEADER, ""))
    exchange = str(headers.get(EXCHANGE_HEADER, ""))
    routing_key = str(headers.get(ROUTING_KEY_HEADER, ""))
    properties = copy.copy(stored.properties)
    properties.headers = {k: v for k, v in headers.items() if k not in STAGING_HEADERS}
    return token, Message(exchange, routing_key, b"", properties)
