"""`RemoteQueue` / `RemoteQueueRegistry`: the client's node side of any-node access.

Theory of operation. When a client on this node (A) uses a queue whose leader
runs on node B, the broker hands the protocol layer a `RemoteQueue` (the
forwarded kind of `QueueType`, logbroker/queue/queue_type.py) instead of a
`QueueShell`: publishes, consumes, gets, counts and purges become requests
to B (`QueueHost`), settlements and cancels become notices, and B's
deliveries come back as `q.deliver` notices that the registry hands to the
consumer's sink (the AMQP channel or WebSocket here) with B's offsets. So the
channel's delivery tags, prefetch and acks work unchanged; per publisher and
per consumer order holds because each node pair has one ordered link.

Flow: B may deliver a consumer its prefetch plus a lookahead; A buffers what
the client may not hold yet and hands it over as acks make room
(`forwarded_consumers.py`), so the client's prefetch never waits for a round
trip to B. B also delivers only what A granted per channel (`WINDOW` when a
channel starts consuming from B, then one per delivery: as it arrives for a
consumer with a prefetch, whose buffer B's prefetch + lookahead bounds; as it
reaches the client or goes back for the others, whose buffer the window
bounds). A returns credit once per loop iteration, and not while its
client's channel has no credit left (a congested socket, a full global
prefetch); the channel's `resume` (which calls `schedule_pump`) hands out
and returns it later. Acks, rejects and returns are posted (`ClusterRpc.post`):
one notice per queue and loop turn carries all of them.

Deliveries the client never got go back to B as undelivered (`q.return`, not
flagged redelivered) when their consumer is cancelled or its channel closes;
deliveries for a consumer this node no longer has go back the same way, and
B drops that consumer (`gone`), which would otherwise get them again.

A queue whose leader node is down (the controller says so, or there is no
link to it) answers 404 naming the queue and the node, RabbitMQ's answer for a
durable queue whose home node is down; publishes routed to it are not
confirmed (nacked). When the link to B breaks, B requeues what consumers on
its queues held; those consumers are cancelled towards their clients
(basic.cancel), except on replicated queues, where their sinks resubscribe
them to the new leader (`logbroker.consumer_resubscription`). So does a
`q.cancelled` that says the leader moved, and, first of all, the metadata:
once it names another leader (`leader_moved`) the consumers move and the
publishes still waiting for the old leader are nacked at once. The old leader
may be paused or cut off, and its link can stay up for as long as that lasts.

Acks are fenced to the link their deliveries came over. A `RemoteQueue` lives
for one link to B: when the link breaks, the registry forgets B's, so the
deliveries a channel holds from before the break settle nothing (B requeued
them; they come again, flagged redelivered), as RabbitMQ ignores the acks of a
channel that died. A `RemoteQueue` learns B's link generation from B's answers
to its consumes and gets (`g`, see queue_host.py) and names it in its settles,
so B, too, counts them only for deliveries made over that link.

Each `q.deliver` names the epoch its queue's leader delivered in (`e`);
deliveries of an epoch older than the metadata's here are stale (the sender
was deposed) and never reach a client: they go back as for a consumer this
node no longer has.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable, Sequence
from typing import Any

from logbroker.cluster.envelope import Envelope
from logbroker.cluster.forwarded_consumers import (
    Buffered,
    ForwardedConsumer,
    ForwardedConsumers,
    lookahead_for,
)
from logbroker.cluster.forwarded_message import decode_message
from logbroker.cluster.forwarding_port import ForwardingPort
from logbroker.cluster.queue_host import WINDOW
from logbroker.cluster.remote_flow import FLOW_OP, RemoteHolds
from logbroker.cluster.remote_publish import RemotePublisher
from logbroker.errors import NOT_FOUND, BrokerError
from logbroker.message import Message
from logbroker.queue.consumers import Consumer
from logbroker.queue.delivery_sink import DeliverySink
from logbroker.queue.queue_type import FORWARDED, Capabilities, Dequeued, QueueStats

logger = logging.getLogger(__name__)


class RemoteQueue:
    def __init__(self, registry: RemoteQueueRegistry, vhost: str, name: str, node: str) -> None:
        self._registry = registry
        self.vhost = vhost
        self._name = name
        self._node = node
        # B's generation of the link this queue is reached over (None: not heard yet,
        # or B is on older code); named in every settle, see queue_host.py.
        self.generation: int | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def node(self) -> str:
        return self._node

    @property
    def closed(self) -> bool:
        return self._registry.cached(self.vhost, self._name) is not self

    def capabilities(self) -> Capabilities:
        return FORWARDED

    def _header(self, **fields: object) -> dict[str, object]:
        return {"v": self.vhost, "q": self._name, **fields}

    def _learn(self, answer: Envelope) -> None:
        generation = answer.header.get("g")
        if generation is not None:
            self.generation = int(generation)

    def ack(self, offsets: Sequence[int]) -> None:
        self._settle(self._header(o=list(offsets), ack=True))

    def reject(self, offsets: Sequence[int], requeue: bool) -> None:
        self._settle(self._header(o=list(offsets), ack=False, requeue=requeue))

    def _settle(self, header: dict[str, object]) -> None:
        if self.closed:
            # Delivered over a link to B that broke (or by a leader since replaced): B
            # requeued them, and they may be out again to another consumer now.
            return
        if self.generation is not None:
            header["g"] = self.generation
        self._registry.settle(self._node, header)

    def schedule_pump(self) -> None:
        self._registry.schedule_turn()

    async def settles_durable(self) -> None:
        # A request goes after the settles posted before it (ClusterRpc.request flushes).
        await self._registry.call(self._node, "q.settles_durable", self._header())

    async def consume(self, consumer: Consumer, sink: DeliverySink) -> None:
        registry = self._registry
        registry.sinks[sink.channel_key] = sink
        forwarded = ForwardedConsumer(self._node, self.vhost, self._name, consumer.tag, sink,
                                      consumer.prefetch_count, consumer.no_ack)
        registry.consumers.add(forwarded)  # B may deliver before it answers
        try:
            answer = await registry.call(self._node, "q.consume", self._header(
                tag=consumer.tag, ck=sink.channel_key, prefetch=consumer.prefetch_count,
                ahead=lookahead_for(consumer.prefetch_count, consumer.no_ack),
                priority=consumer.priority, no_ack=consumer.no_ack,
                exclusive=consumer.exclusive))
        except BaseException:
            registry.give_back(forwarded)
            raise
        # Before the client can settle any of its deliveries (none is handed out
        # before `ready`).
        self._learn(answer)
        if registry.sinks.get(sink.channel_key) is not sink:
            # The channel closed while B registered the consumer. Nothing here may keep
            # the channel's state, and B may have registered it after the close reached
            # it (B waited to catch up, or for the queue to open): then nothing else
            # would drop it there until the link breaks, nor free its sink.
            registry.give_back(forwarded)
            registry.dropped_unanswered(self._node, self._header(
                tag=consumer.tag, ck=sink.channel_key))
            return
        # The caller registers the tag with its channel before this loop turn ends.
        forwarded.ready = True
        registry.grant_window(self._node, sink.channel_key)
        registry.consumers.waiting.add(forwarded)
        registry.schedule_turn()

    def cancel(self, consumer_tag: str) -> None:
        registry = self._registry
        forwarded = registry.consumers.find(self._node, self.vhost, self._name, consumer_tag)
        if forwarded is not None:
            registry.give_back(forwarded)  # before the cancel: B keeps the order
        registry.notify(self._node, "q.cancel", self._header(
            tag=consumer_tag, **({"ck": forwarded.channel_key} if forwarded else {})))

    def channel_closed(self, channel_key: str) -> None:
        self._registry.forget_channel(self._node, channel_key)
        self._registry.notify(self._node, "q.channel_closed", self._header(ck=channel_key))

    async def dequeue(self, channel_key: str, no_ack: bool) -> Dequeued | None:
        answer = await self._registry.call(self._node, "q.get",
                                           self._header(ck=channel_key, no_ack=no_ack))
        self._learn(answer)
        if not answer.header["found"]:
            return None
        header = answer.header
        return Dequeued(int(header["o"]), bool(header["r"]), decode_message(answer.blobs[0]),
                        int(header["left"]))

    async def stats(self) -> QueueStats:
        answer = await self._registry.call(self._node, "q.counts", self._header())
        header = answer.header
        return QueueStats(int(header["messages"]), int(header["consumers"]),
                          int(header["first"]), int(header["end"]))

    async def declared(self) -> QueueStats:
        return await self.stats()  # its leader keeps the idle timer (x-expires)

    async def purge(self) -> int:
        answer = await self._registry.call(self._node, "q.purge", self._header())
        return int(answer.header["count"])

    async def holds_batch(self, producer: str, seq: int, since_ms: int) -> bool:
        answer = await self._registry.call(self._node, "q.holds_batch", self._header(
            producer=producer, seq=seq, since=since_ms))
        return bool(answer.header["holds"])


class RemoteQueueRegistry:
    def __init__(self, node: ForwardingPort) -> None:
        self._node = node
        self._queues: dict[tuple[str, str], RemoteQueue] = {}
        self.sinks: dict[str, DeliverySink] = {}
        self.consumers = ForwardedConsumers()
        self._granted: set[tuple[str, str]] = set()
        self._owed: dict[tuple[str, str], int] = {}  # (node, channel key) -> credit
        self._turn_scheduled = False
        rpc = node.rpc
        rpc.on_notice("q.deliver", self._deliver)
        rpc.on_notice("q.cancelled", self._cancelled)
        self._flow = RemoteHolds(self._leader_of, self.consumers)  # see remote_flow
        rpc.on_notice(FLOW_OP, self._flow.on_notice)
        rpc.batches("q.settle", "o")
        rpc.batches("q.return", "o")
        self._publisher = RemotePublisher(node)

    # ---------------------------------------------------------- RemoteQueues

    def cached(self, vhost: str, name: str) -> RemoteQueue | None:
        return self._queues.get((vhost, name))

    def endpoint(self, vhost: str, name: str) -> RemoteQueue | None:
        record = self._node.state().queue(vhost, name)
        if record is None or record.leader_node in (None, self._node.node_name):
            self._queues.pop((vhost, name), None)
            return None
        leader = record.leader_node
        self._check_up(vhost, name, leader)
        queue = self._queues.get((vhost, name))
        if queue is None or queue.node != leader:
            queue = self._queues[(vhost, name)] = RemoteQueue(self, vhost, name, leader)
        return queue

    def holds(self, vhost: str, names: Iterable[str], publisher_id: str
              ) -> list[asyncio.Future[None]]:
        return self._flow.holds(vhost, names, publisher_id)

    def _leader_of(self, vhost: str, name: str) -> str | None:
        record = self._node.state().queue(vhost, name)
        return record.leader_node if record is not None else None

    def _check_up(self, vhost: str, name: str, leader: str) -> None:
        node_record = self._node.state().cluster_node(leader)
        reachable = self._node.is_connected(leader)
        if not reachable or (node_record is not None and not node_record.up):
            raise BrokerError(NOT_FOUND, f"home node '{leader}' of durable queue '{name}' "
                              f"in vhost '{vhost}' is down or inaccessible")

    def publish(self, vhost: str, batch: Sequence[tuple[Message, Sequence[str]]]
                ) -> Awaitable[list[bool]]:
        return self._publisher.publish(vhost, batch)

    # ------------------------------------------------------------- plumbing

    def notify(self, node: str, op: str, header: dict[str, object]) -> None:
        self._node.rpc.notify(node, Envelope(op, header))

    async def figures(self, node: str, request: dict[str, Any], timeout_s: float
                      ) -> dict[str, Any]:
        """Another node's figures (queue_figures.py); no wait for the metadata to catch
        up there: a queue it does not know yet is answered unknown."""
        answer = await self._node.rpc.call(node, Envelope("q.figures", request), timeout_s)
        return dict(answer.header)

    async def call(self, node: str, op: str, header: dict[str, object]) -> Envelope:
        header = {**header, "a": self._node.applied_index()}
        return await self._node.rpc.call(node, Envelope(op, header),
                                         self._node.request_timeout_s)

    def grant_window(self, node: str, channel_key: str) -> None:
        if (node, channel_key) not in self._granted:
            self._granted.add((node, channel_key))
            self.notify(node, "q.credit", {"ck": channel_key, "n": WINDOW})

    def settle(self, node: str, header: dict[str, object]) -> None:
        """The client acked or rejected: posted, so one notice per queue and loop turn
        carries them; buffered deliveries may go to the client now."""
        vhost, queue, offsets = str(header["v"]), str(header["q"]), header["o"]
        assert isinstance(offsets, list)
        for consumer in self.consumers.settled(node, vhost, queue, offsets):
            # At once, not next turn: the client's next deliveries leave with this
            # loop iteration's output, which is what keeps its prefetch window full.
            self._hand_out(consumer)
        self._node.rpc.post(node, Envelope("q.settle", header),
                            ("q.settle", vhost, queue, header["ack"], header.get("requeue"),
                             header.get("g")))

    def give_back(self, consumer: ForwardedConsumer) -> None:
        """Forget `consumer`; what it buffered goes back to its queue's leader."""
        taken = self.consumers.take_buffered(consumer)
        if taken:
            self._return(consumer.node, consumer.channel_key, consumer.queue, consumer.tag,
                         taken)
            if not consumer.bounded:
                self._owe(consumer.node, consumer.channel_key, len(taken))

    def _return(self, node: str, channel_key: str, queue: str, tag: str,
                taken: list[Buffered], gone: bool = False) -> None:
        # Never reached a client: the leader makes them ready without the redelivered flag
        # (if they are still that delivery: the tag and channel say so). `gone`: this
        # node has no such consumer, so the leader drops it first, or it would send
        # them here again and again.
        offsets = [item.offset for item in taken]
        self._node.rpc.post(node, Envelope("q.return", {
            "ck": channel_key, "q": queue, "tag": tag, "gone": gone, "o": offsets}),
            ("q.return", channel_key, queue, tag, gone))

    def dropped_unanswered(self, node: str, header: dict[str, object]) -> None:
        """A consume `node` answered after its channel closed here: undo it there.

        The channel gone here: closed there too (again, if the close came after
        the consume: a no-op), which frees its sink. A channel reopened under the
        same key (pika reuses channel numbers) shares that sink: only the consumer
        goes, unless the new channel has a consumer with that tag by now.
        """
        channel_key, tag = str(header["ck"]), str(header["tag"])
        if channel_key not in self.sinks:
            self.notify(node, "q.channel_closed", header)
        elif self.consumers.get(channel_key, tag) is None:
            self.notify(node, "q.cancel", header)

    def forget_channel(self, node: str, channel_key: str) -> None:
        self.sinks.pop(channel_key, None)
        for consumer in self.consumers.matching(node=node, channel_key=channel_key):
            self.give_back(consumer)
        self.consumers.channel_gone(node, channel_key)
        self._granted.discard((node, channel_key))
        self._owed.pop((node, channel_key), None)

    def _deliver(self, peer: str, envelope: Envelope) -> None:
        header = envelope.header
        channel_key, queue = str(header["ck"]), str(header["q"])
        epoch = header.get("e")  # None from a node on older code
        state = self._node.state()
        if channel_key not in self.sinks:  # the channel is gone here: close it there too
            self.notify(peer, "q.channel_closed", {"ck": channel_key})
            return
        stray: dict[str, list[Buffered]] = {}  # by consumer tag
        bounded = 0  # deliveries whose credit goes back on arrival (`ForwardedConsumer.bounded`)
        touched: dict[int, ForwardedConsumer] = {}
        consumer: ForwardedConsumer | None = None
        tag_seen: object = None
        counts_bounded = False
        now_ms = self._node.clock.monotonic_ms()
        offsets = header["o"]
        for tag, offset, redelivered, ttl_left, blob in zip(
                header["tag"], offsets, header["r"], header.get("x") or [None] * len(offsets),
                envelope.blobs, strict=True):
            item = Buffered(int(offset), bool(redelivered), blob,
                            None if ttl_left is None else now_ms + int(ttl_left))
            if tag != tag_seen or consumer is None:  # runs of one consumer's deliveries
                tag_seen = tag
                consumer = self.consumers.get(channel_key, str(tag))
                if consumer is not None and (consumer.node, consumer.queue) != (peer, queue):
                    consumer = None
                if consumer is not None and epoch is not None:
                    record = state.queue(consumer.vhost, queue)
                    if record is not None and record.epoch > int(epoch):
                        consumer = None  # a deposed leader's: never to the client
                if consumer is not None:
                    touched[id(consumer)] = consumer
                    counts_bounded = consumer.bounded
            if consumer is None:
                stray.setdefault(str(tag), []).append(item)  # cancelled here meanwhile
                continue
            consumer.buffer.append(item)
            if counts_bounded:
                bounded += 1
        if bounded:
            self._owe(peer, channel_key, bounded)
        for consumer in touched.values():
            self._hand_out(consumer)
        for tag, items in stray.items():
            self._return(peer, channel_key, queue, tag, items, gone=True)
            self._owe(peer, channel_key, len(items))

    def _hand_out(self, consumer: ForwardedConsumer) -> None:
        count, expired = self.consumers.hand_out(consumer,
                                                 self._node.clock.monotonic_ms())
        if expired:  # back to the head of the queue, where the leader expires them
            self._return(consumer.node, consumer.channel_key, consumer.queue, consumer.tag,
                         expired)
            count += len(expired)
        if count and not consumer.bounded:
            self._owe(consumer.node, consumer.channel_key, count)

    def _owe(self, node: str, channel_key: str, count: int) -> None:
        key = (node, channel_key)
        self._owed[key] = self._owed.get(key, 0) + count
        self.schedule_turn()

    def schedule_turn(self) -> None:
        """Hand out what waits for room and return credit, once per loop iteration."""
        if not self._turn_scheduled:
            self._turn_scheduled = True
            asyncio.get_running_loop().call_soon(self._turn)

    def _turn(self) -> None:
        try:
            for consumer in list(self.consumers.waiting):
                self._hand_out(consumer)
            for (node, channel_key), owed in list(self._owed.items()):
                sink = self.sinks.get(channel_key)
                room = sink.credit() if sink is not None else None
                if sink is not None and room is not None and room <= 0:
                    continue  # the client is not taking more: resume() returns it later
                del self._owed[(node, channel_key)]
                self._node.rpc.post(node, Envelope("q.credit", {"ck": channel_key, "n": owed}))
        finally:
            self._turn_scheduled = False

    def _cancelled(self, peer: str, envelope: Envelope) -> None:
        header = envelope.header
        channel_key, queue, tag = str(header["ck"]), str(header["q"]), str(header["tag"])
        consumer = self.consumers.get(channel_key, tag)
        if consumer is None or consumer.node != peer:
            # Already gone from `peer` here (the metadata said the leader moved, or the
            # link broke): the consumer may follow the new leader already, and this
            # late cancel must not move it again.
            return
        self.give_back(consumer)
        sink = self.sinks.get(channel_key)
        if sink is not None:
            sink.consumer_cancelled(queue, tag, bool(header.get("moved")))

    def leader_moved(self, vhost: str, queue: str, old: str) -> None:
        """The metadata names a new leader for `queue`, which `old` led: its consumers
        here follow the new one now, whether or not `old` is alive (paused, cut off),
        and the publishes waiting for `old`'s answer for this queue are nacked.

        What they buffered is dropped, not returned: the new leader delivers every
        message `old` had handed out again, flagged redelivered.
        """
        self._flow.leader_moved(old, vhost, queue)
        self._publisher.leader_moved(old, vhost, queue)
        moved = [c for c in self.consumers.matching(node=old)
                 if (c.vhost, c.queue) == (vhost, queue)]
        for consumer in sorted(moved, key=lambda c: (c.channel_key, c.tag)):
            self.consumers.take_buffered(consumer)
            # `old` forgets the consumer if it still runs (else its channel closes there
            # when the link breaks): it must not deliver to it again.
            self.notify(old, "q.cancel", {"v": vhost, "q": queue, "tag": consumer.tag,
                                          "ck": consumer.channel_key})
            sink = self.sinks.get(consumer.channel_key)
            if sink is not None:
                sink.consumer_cancelled(queue, consumer.tag, True)
        self.consumers.queue_gone(old, vhost, queue)

    def peer_down(self, peer: str) -> None:
        """Consumers on `peer`'s queues are gone: tell their sinks. Those of replicated
        queues may follow the leader that replaces `peer`; the others get basic.cancel.

        What they buffered is dropped: `peer` requeues everything it had sent them,
        and what their clients hold settles nothing any more: `peer`'s queues get new
        `RemoteQueue`s, so those deliveries' endpoints are closed.
        """
        self._flow.peer_down(peer)
        for key in [key for key, queue in self._queues.items() if queue.node == peer]:
            del self._queues[key]
        state = self._node.state()
        gone = self.consumers.matching(node=peer)
        for consumer in sorted(gone, key=lambda c: (c.channel_key, c.vhost, c.queue, c.tag)):
            self.consumers.take_buffered(consumer)
            sink = self.sinks.get(consumer.channel_key)
            record = state.queue(consumer.vhost, consumer.queue)
            if sink is not None:
                sink.consumer_cancelled(consumer.queue, consumer.tag,
                                        record is not None and record.replicated)
        self.consumers.node_gone(peer)
        for key in [key for key in self._granted if key[0] == peer]:
            self._granted.discard(key)
            self._owed.pop(key, None)
