"""`RemoteQueue` / `RemoteQueueRegistry`: the client's node side of any-node access.

Theory of operation. When a client on this node (A) uses a queue whose leader
runs on node B, the broker hands the protocol layer a `RemoteQueue` instead of
a `QueueShell`: publishes, consumes, gets, counts and purges become requests
to B (`QueueHost`), settlements and cancels become notices, and B's
deliveries come back as `q.deliver` notices that the registry hands to the
consumer's sink (the AMQP channel or WebSocket here) with B's offsets. So the
channel's delivery tags, prefetch and acks work unchanged; per publisher and
per consumer order holds because each node pair has one ordered link.

Credit: B delivers only what A granted (`WINDOW` when a channel starts
consuming from B, then one per delivery taken). A returns credit once per
loop iteration, and not while its client's channel has no credit left (a
congested socket, a full global prefetch); the channel's `resume` (which
calls `schedule_pump`) returns it later.

A queue whose leader node is down (the controller says so, or there is no
link to it) answers 404 naming the queue and the node, RabbitMQ's answer for a
durable queue whose home node is down; publishes routed to it are not
confirmed (nacked). When the link to B breaks, consumers on B's queues are
cancelled towards their clients (basic.cancel), B requeues what they held.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING

from logbroker.cluster.envelope import Envelope
from logbroker.cluster.forwarded_message import decode_message, encode_message
from logbroker.cluster.queue_host import WINDOW
from logbroker.errors import NOT_FOUND, BrokerError
from logbroker.message import Message
from logbroker.queue.consumers import Consumer
from logbroker.queue.delivery_sink import DeliverySink

if TYPE_CHECKING:
    from logbroker.cluster.cluster_node import ClusterNode

logger = logging.getLogger(__name__)


class RemoteQueue:
    def __init__(self, registry: RemoteQueueRegistry, vhost: str, name: str, node: str) -> None:
        self._registry = registry
        self.vhost = vhost
        self._name = name
        self._node = node

    @property
    def name(self) -> str:
        return self._name

    @property
    def node(self) -> str:
        return self._node

    @property
    def closed(self) -> bool:
        return self._registry.cached(self.vhost, self._name) is not self

    def _header(self, **fields: object) -> dict[str, object]:
        return {"v": self.vhost, "q": self._name, **fields}

    def ack(self, offsets: Sequence[int]) -> None:
        self._registry.notify(self._node, "q.settle", self._header(o=list(offsets), ack=True))

    def reject(self, offsets: Sequence[int], requeue: bool) -> None:
        self._registry.notify(self._node, "q.settle",
                              self._header(o=list(offsets), ack=False, requeue=requeue))

    def schedule_pump(self) -> None:
        self._registry.return_credit()

    async def consume(self, consumer: Consumer, sink: DeliverySink) -> None:
        registry = self._registry
        registry.sinks[sink.channel_key] = sink
        await registry.call(self._node, "q.consume", self._header(
            tag=consumer.tag, ck=sink.channel_key, prefetch=consumer.prefetch_count,
            priority=consumer.priority, no_ack=consumer.no_ack, exclusive=consumer.exclusive))
        registry.consumers.setdefault(self._node, set()).add(
            (sink.channel_key, self.vhost, self._name, consumer.tag))
        registry.grant_window(self._node, sink.channel_key)

    def cancel(self, consumer_tag: str) -> None:
        self._registry.forget_consumer(self._node, self._name, consumer_tag)
        self._registry.notify(self._node, "q.cancel", self._header(tag=consumer_tag))

    def channel_closed(self, channel_key: str) -> None:
        self._registry.forget_channel(self._node, channel_key)
        self._registry.notify(self._node, "q.channel_closed", self._header(ck=channel_key))

    async def get(self, channel_key: str, no_ack: bool
                  ) -> tuple[int, bool, Message, int] | None:
        answer = await self._registry.call(self._node, "q.get",
                                           self._header(ck=channel_key, no_ack=no_ack))
        if not answer.header["found"]:
            return None
        header = answer.header
        return (int(header["o"]), bool(header["r"]), decode_message(answer.blobs[0]),
                int(header["left"]))

    async def counts(self) -> tuple[int, int]:
        answer = await self._registry.call(self._node, "q.counts", self._header())
        return int(answer.header["messages"]), int(answer.header["consumers"])

    async def purge(self) -> int:
        answer = await self._registry.call(self._node, "q.purge", self._header())
        return int(answer.header["count"])


class RemoteQueueRegistry:
    def __init__(self, node: ClusterNode) -> None:
        self._node = node
        self._queues: dict[tuple[str, str], RemoteQueue] = {}
        self.sinks: dict[str, DeliverySink] = {}
        # node -> (channel key, vhost, queue, consumer tag) of consumers on its queues
        self.consumers: dict[str, set[tuple[str, str, str, str]]] = {}
        self._granted: set[tuple[str, str]] = set()
        self._owed: dict[tuple[str, str], int] = {}
        self._return_scheduled = False
        node.rpc.on_notice("q.deliver", self._deliver)
        node.rpc.on_notice("q.cancelled", self._cancelled)

    # ---------------------------------------------------------- RemoteQueues

    def cached(self, vhost: str, name: str) -> RemoteQueue | None:
        return self._queues.get((vhost, name))

    def endpoint(self, vhost: str, name: str) -> RemoteQueue | None:
        record = self._node.metadata.state.queue(vhost, name)
        if record is None or record.leader_node in (None, self._node.node_name):
            self._queues.pop((vhost, name), None)
            return None
        leader = record.leader_node
        self._check_up(vhost, name, leader)
        queue = self._queues.get((vhost, name))
        if queue is None or queue.node != leader:
            queue = self._queues[(vhost, name)] = RemoteQueue(self, vhost, name, leader)
        return queue

    def _check_up(self, vhost: str, name: str, leader: str) -> None:
        node_record = self._node.metadata.state.cluster_node(leader)
        reachable = self._node.transport.is_connected(leader)
        if not reachable or (node_record is not None and not node_record.up):
            raise BrokerError(NOT_FOUND, f"home node '{leader}' of durable queue '{name}' "
                              f"in vhost '{vhost}' is down or inaccessible")

    def publish(self, vhost: str, batch: Sequence[tuple[Message, Sequence[str]]]
                ) -> Awaitable[list[bool]]:
        state = self._node.metadata.state
        per_node: dict[str, list[tuple[int, Message, list[str]]]] = {}
        confirmed = [True] * len(batch)
        for index, (message, names) in enumerate(batch):
            for name in names:
                record = state.queue(vhost, name)
                leader = record.leader_node if record is not None else None
                if leader is None or not self._node.transport.is_connected(leader):
                    confirmed[index] = False  # its leader is unknown or unreachable
                    continue
                entries = per_node.setdefault(leader, [])
                if entries and entries[-1][0] == index:
                    entries[-1][2].append(name)
                else:
                    entries.append((index, message, [name]))
        requests = []
        for leader, entries in per_node.items():
            envelope = Envelope("q.publish", {
                "v": vhost, "a": self._node.driver.applied_index,
                "t": [names for _, _, names in entries]},
                tuple(encode_message(message) for _, message, _ in entries))
            requests.append((leader, envelope, entries, self._node.rpc.request(leader, envelope)))
        return self._publish_results(requests, confirmed)

    async def _publish_results(self, requests: list[tuple[str, Envelope, list[tuple[
            int, Message, list[str]]], asyncio.Future[Envelope]]], confirmed: list[bool]
                               ) -> list[bool]:
        timeout_s = self._node.settings.proposal_timeout_s * 6
        for leader, envelope, entries, future in requests:
            try:
                answer = await self._node.rpc.answer_of(leader, envelope, future, timeout_s)
                results = answer.header["c"]
            except BrokerError as error:
                logger.warning("publish forwarded to %s failed: %s", leader, error.text)
                results = [False] * len(entries)
            for (index, _, _), ok in zip(entries, results, strict=True):
                confirmed[index] = confirmed[index] and bool(ok)
        return confirmed

    # ------------------------------------------------------------- plumbing

    def notify(self, node: str, op: str, header: dict[str, object]) -> None:
        self._node.rpc.notify(node, Envelope(op, header))

    async def call(self, node: str, op: str, header: dict[str, object]) -> Envelope:
        header = {**header, "a": self._node.driver.applied_index}
        return await self._node.rpc.call(node, Envelope(op, header),
                                         self._node.settings.proposal_timeout_s)

    def grant_window(self, node: str, channel_key: str) -> None:
        if (node, channel_key) not in self._granted:
            self._granted.add((node, channel_key))
            self.notify(node, "q.credit", {"ck": channel_key, "n": WINDOW})

    def forget_consumer(self, node: str, queue: str, tag: str) -> None:
        held = self.consumers.get(node, set())
        for entry in [e for e in held if e[2] == queue and e[3] == tag]:
            held.discard(entry)

    def forget_channel(self, node: str, channel_key: str) -> None:
        self.sinks.pop(channel_key, None)
        self._granted.discard((node, channel_key))
        self._owed.pop((node, channel_key), None)
        held = self.consumers.get(node, set())
        for entry in [e for e in held if e[0] == channel_key]:
            held.discard(entry)

    def _deliver(self, peer: str, envelope: Envelope) -> None:
        header = envelope.header
        channel_key, queue, offset = str(header["ck"]), str(header["q"]), int(header["o"])
        sink = self.sinks.get(channel_key)
        if sink is None:  # the channel is gone here: close it there too (requeues)
            self.notify(peer, "q.channel_closed", {"ck": channel_key})
            return
        tag = header.get("tag")
        sink.deliver(queue, None if tag is None else str(tag), offset, bool(header["r"]),
                     decode_message(envelope.blobs[0]))
        self._owed[(peer, channel_key)] = self._owed.get((peer, channel_key), 0) + 1
        self.return_credit()

    def return_credit(self) -> None:
        if not self._return_scheduled and self._owed:
            self._return_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_credit)

    def _flush_credit(self) -> None:
        self._return_scheduled = False
        for (node, channel_key), owed in list(self._owed.items()):
            sink = self.sinks.get(channel_key)
            room = sink.credit() if sink is not None else None
            if sink is not None and room is not None and room <= 0:
                continue  # the client is not taking more: resume() returns it later
            del self._owed[(node, channel_key)]
            self.notify(node, "q.credit", {"ck": channel_key, "n": owed})

    def _cancelled(self, peer: str, envelope: Envelope) -> None:
        header = envelope.header
        sink = self.sinks.get(str(header["ck"]))
        self.forget_consumer(peer, str(header["q"]), str(header["tag"]))
        if sink is not None:
            sink.consumer_cancelled(str(header["q"]), str(header["tag"]))

    def peer_down(self, peer: str) -> None:
        """Consumers on `peer`'s queues are gone: tell their clients (basic.cancel)."""
        for channel_key, _vhost, queue, tag in sorted(self.consumers.pop(peer, set())):
            sink = self.sinks.get(channel_key)
            if sink is not None:
                sink.consumer_cancelled(queue, tag)
        for key in [key for key in self._granted if key[0] == peer]:
            self._granted.discard(key)
            self._owed.pop(key, None)
