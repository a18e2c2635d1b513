"""What the node's publishers were answered, counted for the overview's `message_stats`,
and what each AMQP channel did, for its own.

The queues count what they take and hand out (`QueueCounters`); these are the
channel-level counts no queue sees: messages published (routed or not),
confirms sent and unroutable mandatory messages returned (`MessageStats`, one
per node), and a channel's publishes, confirms, returns, deliveries, gets,
redeliveries and acks (`ChannelCounters`, one per channel, gone with it). One
integer increment each, made by the front ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class MessageStats:
    publish: int = 0  # messages received from publishers, any protocol
    confirm: int = 0  # publisher confirms (basic.ack) sent
    return_unroutable: int = 0  # basic.return of unroutable mandatory messages
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
