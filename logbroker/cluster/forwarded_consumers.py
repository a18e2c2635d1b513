"""`ForwardedConsumers`: the client's node side of consumers of queues led elsewhere.

Theory of operation. A client on this node (Y) consumes from a queue whose
leader is node X. Each such consumer is a `ForwardedConsumer` here. X may
deliver it its prefetch plus a lookahead (`lookahead_for`): what the client may
not hold yet waits in the consumer's buffer on Y, and `hand_out` passes it to
the client's channel (the `DeliverySink`) as room appears. So an ack frees
room for the next message at once, from Y's buffer, while X refills the
buffer; with one round trip Y -> X -> Y per ack, a prefetch of 100 alone does
not cover the link's latency.

AMQP's basic.qos still holds exactly for the client: a consumer never has more
than `prefetch` deliveries unacked on its channel (`in_client`, counted here
and released by the acks, rejects and recovers that reach `settled`), and the
channel's own credit (the channel-wide prefetch, socket back-pressure) is
asked at every hand-out round, as a queue's pump asks it. no-ack consumers
are never held back: X settles a no-ack message as it sends it, so it goes
straight to the channel, as before.

Messages that never reached the client are given back (`take_buffered`): the
caller returns them to X as undelivered, so they are not flagged redelivered.
A buffered message whose TTL ran out is given back too instead of handed out
(X sends how long each message had left, a duration, so no clocks are
compared): back at the head of its queue on X, it expires there (dead-lettered
or dropped), as RabbitMQ expires messages at the head.

The consumer is registered before its basic.consume is forwarded (X may
deliver before answering it) and hands out nothing until `ready`: until the
channel knows the consumer tag.

Pure bookkeeping and calls into the sink: no I/O, no asyncio.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from logbroker.cluster.forwarded_message import decode_message
from logbroker.queue.delivery_sink import DeliverySink

MIN_LOOKAHEAD_PREFETCH = 16  # below: fair dispatch matters more than throughput
MAX_LOOKAHEAD = 256  # half the credit window of a forwarded channel (queue_host.WINDOW)


def lookahead_for(prefetch: int, no_ack: bool) -> int:
    """How many deliveries beyond its prefetch X may send a forwarded consumer.

    As many again as the prefetch, up to `MAX_LOOKAHEAD`. None for no-ack or
    unlimited consumers (prefetch does not bind them), nor for prefetches under
    `MIN_LOOKAHEAD_PREFETCH`: small prefetches ask for fair dispatch between
    competing consumers, and messages held on Y could go to nobody else.
    """
    if no_ack or prefetch < MIN_LOOKAHEAD_PREFETCH:
        return 0
    return min(prefetch, MAX_LOOKAHEAD)


class Buffered(NamedTuple):  # one per forwarded delivery: a frozen dataclass costs 3x to build
    """A delivery from X the client has not got yet; the message still encoded."""

    offset: int
    redelivered: bool
    blob: bytes
    deadline_ms: int | None = None  # expired after this (the caller's monotonic clock)


@dataclass(eq=False)
class ForwardedConsumer:
    node: str  # the queue's leader (X)
    vhost: str
    queue: str
    tag: str
    sink: DeliverySink
    prefetch: int = 0
    no_ack: bool = False
    ready: bool = False  # the channel knows the tag: hand-outs may start
    buffer: deque[Buffered] = field(default_factory=deque)
    in_client: int = 0  # handed to the channel, not settled yet (not for no-ack)

    @property
    def channel_key(self) -> str:
        return self.sink.channel_key

    @property
    def bounded(self) -> bool:
        """X stops at prefetch + lookahead, which bounds the buffer: the channel's
        credit goes back as deliveries arrive, so a buffer waiting for a slow client
        never holds credit another consumer of the channel needs. Unlimited and
        no-ack consumers return it as deliveries reach the client (the credit
        window is what bounds their buffer)."""
        return self.prefetch > 0 and not self.no_ack

    def room(self) -> int | None:
        """How many more the client may take now: prefetch and channel credit (None:
        no limit). no-ack: no limit, as before buffering - X settled what it sent."""
        if self.no_ack:
            return None
        credit = self.sink.credit()
        if self.prefetch:
            left = self.prefetch - self.in_client
            credit = left if credit is None else min(credit, left)
        return None if credit is None else max(0, credit)


class ForwardedConsumers:
    """Every forwarded consumer of this node's channels, and what the clients hold."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str], ForwardedConsumer] = {}  # (channel key, tag)
        # (node, vhost, queue) -> offset -> consumer: handed out, not settled
        self._held: dict[tuple[str, str, str], dict[int, ForwardedConsumer]] = {}
        self.waiting: set[ForwardedConsumer] = set()  # buffered, and were out of room

    def __len__(self) -> int:
        return len(self._by_key)

    def add(self, consumer: ForwardedConsumer) -> None:
        self._by_key[(consumer.channel_key, consumer.tag)] = consumer

    def get(self, channel_key: str, tag: str) -> ForwardedConsumer | None:
        return self._by_key.get((channel_key, tag))

    def find(self, node: str, vhost: str, queue: str, tag: str) -> ForwardedConsumer | None:
        """The consumer `tag` of a queue (a tag is unique per queue)."""
        for consumer in self._by_key.values():
            if (consumer.node, consumer.vhost, consumer.queue, consumer.tag) == (
                    node, vhost, queue, tag):
                return consumer
        return None

    def matching(self, *, node: str | None = None, channel_key: str | None = None
                 ) -> list[ForwardedConsumer]:
        return [c for c in self._by_key.values()
                if (node is None or c.node == node)
                and (channel_key is None or c.channel_key == channel_key)]

    def take_buffered(self, consumer: ForwardedConsumer) -> list[Buffered]:
        """Forget `consumer`; what it had not handed out yet (to give back to X).

        What the client holds stays held: its acks still release it.
        """
        if self._by_key.get((consumer.channel_key, consumer.tag)) is consumer:
            del self._by_key[(consumer.channel_key, consumer.tag)]
        self.waiting.discard(consumer)
        taken = list(consumer.buffer)
        consumer.buffer.clear()
        consumer.ready = False
        return taken

    def channel_gone(self, node: str, channel_key: str) -> None:
        """The channel closed: X requeues all it held, so nothing is held any more."""
        for held in [h for key, h in self._held.items() if key[0] == node]:
            for offset in [o for o, c in held.items() if c.channel_key == channel_key]:
                del held[offset]

    def node_gone(self, node: str) -> None:
        for key in [key for key in self._held if key[0] == node]:
            del self._held[key]

    def queue_gone(self, node: str, vhost: str, queue: str) -> None:
        """`node` no longer leads the queue: what its deliveries left held is void (the
        new leader delivers those messages again)."""
        self._held.pop((node, vhost, queue), None)

    def hand_out(self, consumer: ForwardedConsumer, now_ms: int
                 ) -> tuple[int, list[Buffered]]:
        """Pass buffered deliveries to the client while it has room: how many went,
        and the expired ones met on the way (taken out, for X)."""
        if not consumer.ready:
            return 0, []
        count = 0
        expired: list[Buffered] = []
        held = None
        room = consumer.room()  # asked once per round and counted down, as a pump does
        while consumer.buffer and (room is None or room > 0):
            item = consumer.buffer.popleft()
            if not consumer.no_ack:
                if item.deadline_ms is not None and now_ms > item.deadline_ms:
                    expired.append(item)
                    continue
                if held is None:
                    held = self._held.setdefault(
                        (consumer.node, consumer.vhost, consumer.queue), {})
                held[item.offset] = consumer
                consumer.in_client += 1
            if room is not None:
                room -= 1
            count += 1
            consumer.sink.deliver(consumer.queue, consumer.tag, item.offset,
                                  item.redelivered, decode_message(item.blob))
        if consumer.buffer:
            self.waiting.add(consumer)
        else:
            self.waiting.discard(consumer)
        return count, expired

    def settled(self, node: str, vhost: str, queue: str, offsets: list[int]
                ) -> set[ForwardedConsumer]:
        """The client settled `offsets` (ack, reject, recover): the consumers that
        got room and have something buffered."""
        held = self._held.get((node, vhost, queue))
        if not held:
            return set()
        freed = set()
        for offset in offsets:
            consumer = held.pop(offset, None)
            if consumer is not None:
                consumer.in_client -= 1
                if consumer.buffer:
                    freed.add(consumer)
        return freed
