"""What the node's publishers were answered and its queues handed out, counted for the
overview's `message_stats`, and what each AMQP channel did, for its own.

Each queue counts what it takes and hands out (`QueueCounters`), gone with it or
with its leadership. The node keeps (`MessageStats`, one per node) the
channel-level counts no queue sees: messages published (routed or not),
confirms sent and unroutable mandatory messages returned, one integer increment
each made by the front ends; and the totals of what the queues it leads
delivered, handed to basic.get, redelivered and had acked, counted by each queue
where it delivers, so that they never drop when a queue is deleted (RabbitMQ's
node-level totals). A channel's publishes, confirms, returns, deliveries, gets,
redeliveries and acks are its own (`ChannelCounters`, gone with it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from logbroker.queue.queue_stats import QueueCounters


@dataclass
class MessageStats:
    publish: int = 0  # messages received from publishers, any protocol
    confirm: int = 0  # publisher confirms (basic.ack) sent
    return_unroutable: int = 0  # basic.return of unroutable mandatory messages
    # What every queue led here delivered and had acked (the shells count in it).
    queues: QueueCounters = field(default_factory=QueueCounters)
    # (vhost, exchange) -> [messages in, messages routed on to a queue]: RabbitMQ's
    # publish_in / publish_out of the exchanges published to on this node.
    exchanges: dict[tuple[str, str], list[int]] = field(default_factory=dict)

    def routed(self, vhost: str, exchange: str, to_queues: bool) -> None:
        counts = self.exchanges.get((vhost, exchange))
        if counts is None:
            counts = self.exchanges[(vhost, exchange)] = [0, 0]
        counts[0] += 1
        counts[1] += to_queues

    def forget_exchanges(self, exists: Callable[[str, str], bool]) -> None:
        """Drop the counts of deleted exchanges (the dict stays as big as the topology)."""
        for key in [key for key in self.exchanges if not exists(*key)]:
            del self.exchanges[key]


@dataclass(slots=True)
class ChannelCounters:
    publish: int = 0
    confirm: int = 0
    return_unroutable: int = 0
    deliver: int = 0  # to consumers
    get: int = 0  # basic.get-ok
    redeliver: int = 0  # of those, flagged redelivered
    ack: int = 0  # deliveries the client acked

    def as_dict(self) -> dict[str, int]:
        return {"publish": self.publish, "confirm": self.confirm,
                "return_unroutable": self.return_unroutable, "deliver": self.deliver,
                "get": self.get, "deliver_get": self.deliver + self.get,
                "redeliver": self.redeliver, "ack": self.ack}
