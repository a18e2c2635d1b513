"""`QueueHost`: the queue leader's side of any-node access.

Theory of operation. A node that has a client but not the queue (A) forwards
the client's operations to the queue's leader node (B, this module):

- `q.publish`: messages with the names of their target queues here (and the
  epoch A meant for each replicated one: a queue not led here for it takes none
  of them, see publish_epochs.py); they are admitted and appended exactly as a
  local publish, and the answer says per message whether it was confirmed (a
  target queue that holds its publishers tells A with `q.flow`, see
  remote_flow.py);
- `q.consume` registers a consumer on the local shell whose sink is a
  `ForwardedSink`: one per (node A, A's channel), so per-channel prefetch and
  channel-wide credit keep working; `q.get`, `q.counts` (with the log's range),
  `q.purge`, `q.holds_batch`;
- notices `q.settle` (ack / reject by offset), `q.return` (deliveries A
  buffered that never reached its client; `gone`: A has no such consumer, so
  it is removed here first), `q.cancel`, `q.channel_closed`
  and `q.credit` (A handed deliveries to its client and returns the credit).

Flow control: a forwarded consumer may hold its prefetch plus the lookahead A
asked for (`ahead`; A buffers the excess and keeps the client to its
prefetch, see forwarded_consumers.py). A forwarded sink starts with no credit
and delivers only what A granted (A grants `WINDOW` when the consumer is
registered and returns credit as its client takes deliveries), so a deep
queue never floods the link. Deliveries are posted (`ClusterRpc.post`): one
`q.deliver` notice per channel, queue and loop turn carries a pump's batch.

Every request names the metadata index A had applied (`a`); B first waits
until it applied as much, so a queue A just declared is open here before A's
first publish or consume reaches it.

When the link to A goes down, every channel A forwarded is closed here: its
consumers go at once, and its unacked messages (buffered on A or not: B cannot
tell) are ready again `REQUEUE_GRACE_S` later and redelivered flagged
redelivered, as when an AMQP connection drops. The grace is for A: until A sees
the same break it may hand its client what it buffered, unflagged, and that
copy must not come after a flagged one.

Link generations fence A's acks to the deliveries they answer. Each link to A
has a generation (`generation`), bumped when it breaks; A's channels are keyed
here by it (`forwarded_channel_key`), every delivery, consume and get answer
names it (`g`), and A's settles name the generation of what they answer. A settle
counts only for offsets a channel of that generation of A still holds
(`QueueCore.held_by_channels` over `forwarded_channel_prefix(A, g)`): one from
before a break never settles the message's later delivery, even to a channel of
A with the same key (a consumer that followed, a reopened channel), which would
then be lost if that consumer died (RabbitMQ ignores acks of a channel that died;
its messages were requeued). Within the grace it still settles the copy it
answers, which is not requeued then (A itself drops such acks once it saw the
break: its `RemoteQueue`s for this node are new, see remote_queue.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import cast

from logbroker.broker import MOVE_WAIT_S
from logbroker.cluster import publish_epochs
from logbroker.cluster.cluster_rpc import ClusterRpc
from logbroker.cluster.envelope import Envelope
from logbroker.cluster.forwarded_message import decode_message, encode_message, encode_record
from logbroker.cluster.local_queues import LocalQueues
from logbroker.cluster.remote_flow import HoldAnnouncer
from logbroker.errors import NOT_FOUND, PRECONDITION_FAILED, BrokerError
from logbroker.message import Message
from logbroker.metadata import MetadataState
from logbroker.producer_batches import holds_batch
from logbroker.queue.consumers import Consumer
from logbroker.queue.queue_shell import QueueShell
from logbroker.queue.replication_gate import ConfirmRefused, GateFenced
from segments.record_batch import LogRecord, Record

logger = logging.getLogger(__name__)
WINDOW = 512  # deliveries in flight per forwarded channel
# When the link to a client's node breaks, that node may still hand its client
# deliveries it buffered (lookahead) until it sees the same break: those copies go
# out unflagged. What its channels held is therefore requeued (and redelivered,
# flagged) only this long after the break, so a flagged copy never comes first.
REQUEUE_GRACE_S = 0.25


def forwarded_channel_prefix(node: str, generation: int | None = None) -> str:
    """The start of the channel keys here of the channels `node` forwards: over the
    link of `generation`, or (None) over any link, for settles that name none (a
    node on older code)."""
    return f"{node}|" if generation is None else f"{node}|{generation}|"


def forwarded_channel_key(node: str, generation: int, remote_key: str) -> str:
    """The key here of `node`'s channel `remote_key` over the link of `generation`."""
    return forwarded_channel_prefix(node, generation) + remote_key


def _no_figures(_header: dict[str, object]) -> dict[str, object]:
    return {}


@dataclass(frozen=True, slots=True)
class HostPorts:
    """What `QueueHost` needs of its node, which builds this port (never the node)."""

    node_name: str
    rpc: ClusterRpc
    queues: Callable[[], LocalQueues]  # the broker, once the node started
    state: Callable[[], MetadataState]  # the metadata as applied here
    # Returns once this node applied the metadata log up to that index (or times out).
    wait_applied: Callable[[int], Awaitable[None]]
    started_ms: int  # wall time: the first link generation (see `QueueHost.generation`)
    # The answer to `q.figures` (queue_figures.figures_answer over the broker); none here:
    # a node asking is told nothing is led here.
    figures: Callable[[dict[str, object]], dict[str, object]] = _no_figures


@dataclass
class ForwardedSink:
    """The `DeliverySink` of consumers registered from another node's channel."""

    host: QueueHost
    node: str
    remote_key: str
    generation: int  # of the link to `node` this channel was opened over
    granted: int = 0
    sent: int = 0
    queues: set[tuple[str, str]] = field(default_factory=set)
    _open: Envelope | None = None  # the q.deliver this sink appends to (`deliver`)
    shells: dict[str, QueueShell] = field(default_factory=dict)  # by name, for `ttl_left`

    @property
    def channel_key(self) -> str:
        return forwarded_channel_key(self.node, self.generation, self.remote_key)

    def deliver(self, queue: str, consumer_tag: str | None, offset: int, redelivered: bool,
                message: Message) -> None:
        self._post(queue, consumer_tag, offset, redelivered, encode_message(message),
                   self.host.ttl_left(self, queue, offset))

    def deliver_record(self, queue: str, consumer_tag: str | None, offset: int,
                       redelivered: bool, record: LogRecord | Record,
                       ttl_left_ms: int | None) -> None:
        self._post(queue, consumer_tag, offset, redelivered, encode_record(record), ttl_left_ms)

    def _post(self, queue: str, consumer_tag: str | None, offset: int, redelivered: bool,
              blob: bytes, ttl_left_ms: int | None) -> None:
        self.sent += 1
        rpc = self.host.rpc
        envelope = self._open
        if (envelope is not None and envelope.header["q"] == queue
                and rpc.extend_last(self.node, envelope, len(blob))):
            header = envelope.header
            header["tag"].append(consumer_tag)
            header["o"].append(offset)
            header["r"].append(redelivered)
            header["x"].append(ttl_left_ms)
            cast(list[bytes], envelope.blobs).append(blob)
            return
        # One envelope per queue and loop turn, appended to while nothing else is posted
        # to the node after it (which keeps the order of notices).
        envelope = self._open = Envelope("q.deliver", {
            "q": queue, "ck": self.remote_key, "e": self.host.epoch_of(self, queue),
            "g": self.generation,
            "tag": [consumer_tag], "o": [offset], "r": [redelivered], "x": [ttl_left_ms]},
            [blob])
        rpc.post(self.node, envelope)
        # Let go of it once this turn's notices are sent (after the flush, which was
        # scheduled first): an idle sink must not hold its last megabyte of messages.
        asyncio.get_running_loop().call_soon(self._let_go, envelope)

    def _let_go(self, envelope: Envelope) -> None:
        if self._open is envelope:
            self._open = None

    def consumer_cancelled(self, queue: str, consumer_tag: str,
                           leader_moved: bool = False) -> None:
        self.host.rpc.notify(self.node, Envelope("q.cancelled", {
            "q": queue, "tag": consumer_tag, "ck": self.remote_key, "moved": leader_moved}))

    def credit(self) -> int | None:
        return max(0, self.granted - self.sent)


class QueueHost:
    def __init__(self, ports: HostPorts) -> None:
        self._ports = ports
        self.rpc = rpc = ports.rpc
        self._sinks: dict[tuple[str, str], ForwardedSink] = {}
        self._generations: dict[str, int] = {}  # per peer: its link's (see `generation`)
        # Queues here holding their publishers tell the nodes publishing through them.
        self._holds = HoldAnnouncer(lambda peer, notice: rpc.post(peer, notice))
        rpc.handle("q.publish", self._publish)
        rpc.handle("q.consume", self._consume)
        rpc.handle("q.get", self._get)
        rpc.handle("q.counts", self._counts)
        rpc.handle("q.figures", self._figures)
        rpc.handle("q.purge", self._purge)
        rpc.handle("q.holds_batch", self._holds_batch)
        rpc.handle("q.settles_durable", self._settles_durable)
        rpc.on_notice("q.settle", self._settle)
        rpc.on_notice("q.return", self._return)
        rpc.on_notice("q.cancel", self._cancel)
        rpc.on_notice("q.channel_closed", self._channel_closed)
        rpc.on_notice("q.credit", self._credit)

    async def _caught_up(self, header: dict[str, object]) -> None:
        await self._ports.wait_applied(int(str(header.get("a", 0))))

    async def _shell(self, vhost: str, name: str) -> QueueShell:
        shell = await self._opened(vhost, name)
        if shell is None:
            raise BrokerError(NOT_FOUND, f"no queue '{name}' in vhost '{vhost}' "
                              f"on node {self._ports.node_name}")
        return shell

    async def _opened(self, vhost: str, name: str) -> QueueShell | None:
        """The queue's shell here; one this node was just elected to lead (a failover or
        handover under way) is waited for, briefly, rather than answered 404."""
        broker = self._ports.queues()
        shell = broker.queue(vhost, name)
        if shell is None and broker.roles is not None and broker.leads_queue(vhost, name):
            await broker.roles.moved(vhost, name, MOVE_WAIT_S)
            shell = broker.queue(vhost, name)
        return shell

    # ------------------------------------------------------------ requests

    async def _publish(self, peer: str, envelope: Envelope) -> Envelope:
        await self._caught_up(envelope.header)
        vhost = str(envelope.header["v"])
        broker = self._ports.queues()
        routed: list[tuple[Message, list[QueueShell]]] = []
        missing: set[int] = set()
        names_of = envelope.header["t"]  # per message: its target queues' names
        opened = {name: await self._opened(vhost, name)  # a batch mostly has one target
                  for name in {str(name) for names in names_of for name in names}}
        self._fence_epochs(peer, vhost, envelope.header.get("e"), opened)
        last_names: object = None
        shells: list[QueueShell] = []
        for index, (blob, names) in enumerate(zip(envelope.blobs, names_of, strict=True)):
            if names != last_names:  # runs of messages to the same queues share a list
                last_names, targets = names, [opened[str(name)] for name in names]
                gone = None in targets
                shells = cast(list[QueueShell], [s for s in targets if s is not None])
            if gone:
                missing.add(index)  # not led here (any more): not confirmed
            routed.append((decode_message(blob), shells))
        appended = broker.publisher.start_routed(routed)
        self._holds.after_publish(peer, vhost, [s for s in opened.values() if s is not None])
        try:
            results = await appended
        except ConfirmRefused as refused:
            # An expected outcome (a leader fenced meanwhile, too few replicas), not a
            # fault of this request: the publisher gets nacks, as a local one would.
            logger.info("publish forwarded by %s not confirmed (nacked): %s", peer, refused)
            return Envelope("ok", {"c": [False] * len(routed)})
        return Envelope("ok", {"c": [r.confirmed and i not in missing
                                     for i, r in enumerate(results)]})

    def _fence_epochs(self, peer: str, vhost: str, believed: object,
                      opened: dict[str, QueueShell | None]) -> None:
        """Drop from `opened` the queues this node does not lead for the epoch the
        sender meant (`publish_epochs`): their messages are not confirmed."""
        if not isinstance(believed, dict):
            return  # a sender on older code
        state = self._ports.state()
        for name, epoch in believed.items():
            shell = opened.get(str(name))
            if shell is None:
                continue
            gate = shell.replication
            why = publish_epochs.refusal(int(epoch), gate.leader.epoch if gate else None,
                                         state.queue(vhost, str(name)), self._ports.node_name)
            if why is not None:
                logger.info("publish from %s to queue %r in vhost %r nacked: %s",
                            peer, name, vhost, why)
                opened[str(name)] = None

    async def _consume(self, peer: str, envelope: Envelope) -> Envelope:
        await self._caught_up(envelope.header)
        header = envelope.header
        vhost, name = str(header["v"]), str(header["q"])
        shell = await self._shell(vhost, name)
        sink = self._sink(peer, str(header["ck"]))
        consumer = Consumer(str(header["tag"]), sink.channel_key,
                            prefetch_count=int(header["prefetch"]),
                            lookahead=int(header.get("ahead", 0)),
                            priority=int(header["priority"]), no_ack=bool(header["no_ack"]),
                            exclusive=bool(header["exclusive"]))
        await shell.consume(consumer, sink)
        sink.queues.add((vhost, name))
        return Envelope("ok", {"g": sink.generation})

    async def _get(self, peer: str, envelope: Envelope) -> Envelope:
        await self._caught_up(envelope.header)
        header = envelope.header
        vhost, name = str(header["v"]), str(header["q"])
        shell = await self._shell(vhost, name)
        sink = self._sink(peer, str(header["ck"]))
        sink.queues.add((vhost, name))
        found = await shell.dequeue(sink.channel_key, bool(header["no_ack"]))
        if found is None:
            return Envelope("ok", {"found": False, "g": sink.generation})
        return Envelope("ok", {"found": True, "o": found.offset, "r": found.redelivered,
                               "left": found.messages_left, "g": sink.generation},
                        (encode_message(found.message),))

    async def _counts(self, peer: str, envelope: Envelope) -> Envelope:
        await self._caught_up(envelope.header)
        shell = await self._shell(str(envelope.header["v"]), str(envelope.header["q"]))
        stats = await shell.stats()
        # `first` / `end`: the log's retained range, for consumer groups' lag elsewhere.
        return Envelope("ok", {"messages": stats.messages, "consumers": stats.consumers,
                               "first": stats.first_offset, "end": stats.end_offset})

    async def _figures(self, peer: str, envelope: Envelope) -> Envelope:
        """Batched figures for another node's pages (queue_figures.py): answered from
        what is here now, without waiting, so a page never waits on this node."""
        return Envelope("ok", self._ports.figures(envelope.header))

    async def _holds_batch(self, peer: str, envelope: Envelope) -> Envelope:
        """Asked by a node finishing a pending transactional batch (producer_batches)."""
        await self._caught_up(envelope.header)
        header = envelope.header
        shell = await self._shell(str(header["v"]), str(header["q"]))
        holds = holds_batch(shell, str(header["producer"]), int(str(header["seq"])),
                            int(str(header["since"])))
        return Envelope("ok", {"holds": holds})

    async def _purge(self, peer: str, envelope: Envelope) -> Envelope:
        await self._caught_up(envelope.header)
        shell = await self._shell(str(envelope.header["v"]), str(envelope.header["q"]))
        return Envelope("ok", {"count": await shell.purge()})

    async def _settles_durable(self, peer: str, envelope: Envelope) -> Envelope:
        # The settles this waits for came before it on the same link: applied already.
        shell = await self._shell(str(envelope.header["v"]), str(envelope.header["q"]))
        try:
            await shell.settles_durable()
        except GateFenced as fenced:
            raise BrokerError(PRECONDITION_FAILED, f"acks not replicated: {fenced}") from None
        return Envelope("ok")

    # ------------------------------------------------------------- notices

    def _settle(self, peer: str, envelope: Envelope) -> None:
        header = envelope.header
        shell = self._ports.queues().queue(str(header["v"]), str(header["q"]))
        if shell is None:
            return  # deleted meanwhile: nothing to settle
        # A settle from before a broken link can come after the message was requeued
        # and delivered to someone else: it must not settle that delivery. So it counts
        # only where a channel of the link generation it names holds the offset.
        generation = header.get("g")
        offsets = shell.core.held_by_channels(
            [int(o) for o in header["o"]],
            forwarded_channel_prefix(peer, None if generation is None else int(generation)))
        if not offsets:
            return
        if header["ack"]:
            shell.ack(offsets)
        else:
            shell.reject(offsets, bool(header["requeue"]))

    def _return(self, peer: str, envelope: Envelope) -> None:
        header = envelope.header
        sink = self._sinks.get((peer, str(header["ck"])))
        if sink is None:
            return  # the channel closed here already: it requeued them
        offsets, tag = [int(offset) for offset in header["o"]], str(header["tag"])
        broker = self._ports.queues()
        for vhost, name in sink.queues:
            shell = broker.queue(vhost, name) if name == header["q"] else None
            if shell is None:
                continue
            if header.get("gone"):  # A has no such consumer: stop delivering to it
                self._remove_consumer(peer, str(header["ck"]), shell, tag)
            # The shell has no call for this: nothing to carry out, so the core's.
            shell.core.return_undelivered(offsets, sink.channel_key, tag)
            shell.schedule_pump()

    def _cancel(self, peer: str, envelope: Envelope) -> None:
        header = envelope.header
        shell = self._ports.queues().queue(str(header["v"]), str(header["q"]))
        if shell is None:
            return
        if "ck" in header:
            self._remove_consumer(peer, str(header["ck"]), shell, str(header["tag"]))
        else:  # from a node that does not say the channel
            shell.cancel(str(header["tag"]))

    def _remove_consumer(self, peer: str, remote_key: str, shell: QueueShell, tag: str
                         ) -> None:
        consumer = shell.core.roster.get(tag)
        sink = self._sinks.get((peer, remote_key))
        if consumer is None or sink is None or consumer.channel_key != sink.channel_key:
            return  # not that channel's consumer (any more): the tag may be reused
        shell.cancel(tag)

    def _channel_closed(self, peer: str, envelope: Envelope) -> None:
        sink = self._sinks.pop((peer, str(envelope.header["ck"])), None)
        if sink is not None:
            self._close_sink(sink)

    def _credit(self, peer: str, envelope: Envelope) -> None:
        sink = self._sinks.get((peer, str(envelope.header["ck"])))
        if sink is None:
            return
        sink.granted += int(envelope.header["n"])
        broker = self._ports.queues()
        for vhost, name in sink.queues:
            shell = broker.queue(vhost, name)
            if shell is not None:
                shell.schedule_pump()

    # ------------------------------------------------------------- helpers

    def epoch_of(self, sink: ForwardedSink, queue: str) -> int | None:
        """The leader epoch `queue` is delivered in here (None: not replicated), so the
        receiving node can drop what a deposed leader sends."""
        shell = self._sink_shell(sink, queue)
        gate = shell.replication if shell is not None else None
        return gate.leader.epoch if gate is not None else None

    def _sink_shell(self, sink: ForwardedSink, queue: str) -> QueueShell | None:
        shell = sink.shells.get(queue)
        if shell is None or shell.closed:
            shell = next((self._ports.queues().queue(vhost, name) for vhost, name in sink.queues
                          if name == queue), None)  # one vhost per channel: names are unique
            if shell is None:
                return None
            sink.shells[queue] = shell
        return shell

    def ttl_left(self, sink: ForwardedSink, queue: str, offset: int) -> int | None:
        """Milliseconds until the delivery at `offset` would expire here (None: never).

        A duration, not a time, so A can tell when a message it buffered expired
        without comparing clocks with this node.
        """
        shell = self._sink_shell(sink, queue)
        return shell.ttl_left_ms(offset) if shell is not None else None

    def generation(self, peer: str) -> int:
        """The generation of the link to `peer`. The first is this node's start time in
        ms, so a node that restarted never reuses one a peer may still name."""
        return self._generations.get(peer, self._ports.started_ms)

    def _sink(self, peer: str, remote_key: str) -> ForwardedSink:
        sink = self._sinks.get((peer, remote_key))
        if sink is None:
            sink = self._sinks[(peer, remote_key)] = ForwardedSink(
                self, peer, remote_key, self.generation(peer))
        return sink

    def _close_sink(self, sink: ForwardedSink, requeue_after_s: float = 0.0) -> None:
        broker = self._ports.queues()
        for vhost, name in sink.queues:
            shell = broker.queue(vhost, name)
            if shell is None:
                continue
            if not requeue_after_s:
                shell.channel_closed(sink.channel_key)
                continue
            held = shell.core.unacked_of(sink.channel_key)
            shell.channel_closed(sink.channel_key, requeue=False)
            if held:
                asyncio.get_running_loop().call_later(
                    requeue_after_s, shell.requeue_held, sink.channel_key, held)

    def peer_down(self, peer: str) -> None:
        """The link to `peer` broke: its forwarded channels are closed. Their consumers
        go at once; what they held is requeued `REQUEUE_GRACE_S` later (see there)."""
        self._holds.peer_down(peer)
        # What `peer` settles from now on names the new generation, unless it answers
        # a delivery made over the link that broke.
        self._generations[peer] = self.generation(peer) + 1
        for key in [key for key in self._sinks if key[0] == peer]:
            self._close_sink(self._sinks.pop(key), requeue_after_s=REQUEUE_GRACE_S)
