"""Consuming: basic.consume / cancel / get and the settlement of deliveries.

Deliveries go to a `DeliverySink` (an AMQP channel, a WebSocket...), which
owns delivery tags; the broker side speaks in (queue, offset). An auto-delete
queue is deleted when its last consumer goes, as RabbitMQ does, and an
exclusive consumer or a consumer on another connection's exclusive queue is
refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logbroker.broker import Broker
from logbroker.broker_config import Session
from logbroker.definitions import server_generated_name
from logbroker.errors import NOT_FOUND, BrokerError
from logbroker.message import Message
from logbroker.metadata import DeleteQueue
from logbroker.queue.consumers import Consumer
from logbroker.queue.queue_core import ConsumerRefused
from logbroker.queue.queue_endpoint import QueueEndpoint, RemoteQueueEndpoint
from logbroker.queue.queue_shell import DeliverySink, QueueShell


async def consume(
    broker: Broker, session: Session, queue: str, sink: DeliverySink, *,
    consumer_tag: str = "", no_ack: bool = False, exclusive: bool = False,
    prefetch_count: int = 0, arguments: Mapping[str, Any] | None = None,
) -> tuple[str, QueueEndpoint]:
    """basic.consume: the consumer tag (generated when empty) and the queue's endpoint."""
    endpoint = await _readable(broker, session, queue)
    tag = consumer_tag or server_generated_name("amq.ctag-")
    priority = (arguments or {}).get("x-priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise BrokerError(406, f"invalid arg 'x-priority' for consumer '{tag}': {priority!r}")
    consumer = Consumer(tag, sink.channel_key, prefetch_count=prefetch_count,
                        priority=priority, no_ack=no_ack, exclusive=exclusive)
    if not isinstance(endpoint, QueueShell):
        await endpoint.consume(consumer, sink)  # the leader node runs `add_consumer` below
        return tag, endpoint
    add_consumer(endpoint, consumer, sink, session.vhost)
    return tag, endpoint


def add_consumer(shell: QueueShell, consumer: Consumer, sink: DeliverySink, vhost: str) -> None:
    try:
        shell.add_consumer(consumer, sink)
    except ConsumerRefused as refused:
        text = refused.text
        if refused.reply_code == 403:
            text = f"queue '{shell.name}' in vhost '{vhost}' in exclusive use"
        raise BrokerError(refused.reply_code, text.split(" - ", 1)[-1]) from refused
    shell.had_consumers = True


def cancel(broker: Broker, session: Session, queue: str, consumer_tag: str) -> None:
    """basic.cancel (or the channel closing): auto-delete queues go with their last consumer."""
    endpoint = _endpoint_quietly(broker, session.vhost, queue)
    if endpoint is None:
        return
    if not isinstance(endpoint, QueueShell):
        endpoint.cancel(consumer_tag)
        return
    endpoint.remove_consumer(consumer_tag)
    delete_if_auto_delete_and_unused(broker, endpoint)


async def get(
    broker: Broker, session: Session, queue: str, channel_key: str, no_ack: bool
) -> tuple[int, bool, Message, int, QueueEndpoint] | None:
    """basic.get: (offset, redelivered, message, messages left, endpoint) or None if empty."""
    endpoint = await _readable(broker, session, queue)
    if not isinstance(endpoint, QueueShell):
        got = await endpoint.get(channel_key, no_ack)
        return None if got is None else (*got, endpoint)
    found = endpoint.get(channel_key, no_ack)
    if found is None:
        return None
    offset, redelivered, message = found
    return offset, redelivered, message, endpoint.core.message_count, endpoint


def channel_closed(broker: Broker, vhost: str, channel_key: str, queues: set[str]) -> None:
    """Requeue what the channel left unacked on each queue it used."""
    for name in queues:
        endpoint = _endpoint_quietly(broker, vhost, name)
        if isinstance(endpoint, QueueShell):
            local_channel_closed(broker, endpoint, channel_key)
        elif endpoint is not None:
            endpoint.channel_closed(channel_key)


def local_channel_closed(broker: Broker, shell: QueueShell, channel_key: str,
                         requeue: bool = True) -> None:
    tags = [t for t in shell.consumer_tags()
            if (c := shell.core.roster.get(t)) is not None and c.channel_key == channel_key]
    shell.channel_closed(channel_key, requeue)
    if tags:
        delete_if_auto_delete_and_unused(broker, shell)


def _endpoint_quietly(broker: Broker, vhost: str, name: str
                      ) -> QueueShell | RemoteQueueEndpoint | None:
    try:
        return broker.endpoint(vhost, name)
    except BrokerError:
        return None  # its node is down: nothing there to cancel or requeue from here


def delete_if_auto_delete_and_unused(broker: Broker, shell: QueueShell) -> None:
    """RabbitMQ deletes an auto-delete queue when its last consumer goes."""
    vhost, name = shell.settings.vhost, shell.name
    record = broker.state.queue(vhost, name)
    if record is not None and record.auto_delete and shell.had_consumers \
            and shell.core.consumer_count == 0:
        broker.apply_soon(DeleteQueue(vhost, name))


async def _readable(broker: Broker, session: Session, queue: str
                    ) -> QueueShell | RemoteQueueEndpoint:
    broker.state.check_queue_access(session.vhost, queue, session.connection_id)
    broker.check(session, "queue", queue, "read")
    endpoint = await broker.endpoint_when_open(session.vhost, queue)
    if endpoint is None:
        raise BrokerError(NOT_FOUND, f"no queue '{queue}' in vhost '{session.vhost}'")
    return endpoint
