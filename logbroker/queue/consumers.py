"""Which consumer gets the next message.

RabbitMQ's rules: consumers with the highest `x-priority` that can take a
message get it; among equal priorities, round-robin. A consumer can take a
message while its unacked count is below its prefetch (0: no limit) and its
channel has credit left (the channel-wide `global` prefetch, supplied by the
caller because it spans queues, and also reflects the channel's socket
back-pressure). `no_ack` consumers are not limited by prefetch, but they do
consume channel credit. A consumer registered from another node's channel may
hold `lookahead` deliveries beyond its prefetch: that node buffers them and
hands its client no more than the prefetch (logbroker/cluster). With single
active consumer only the earliest registered consumer still present receives
anything; the next takes over when it leaves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(slots=True)
class Consumer:
    tag: str
    channel_key: str
    prefetch_count: int = 0
    priority: int = 0
    no_ack: bool = False
    exclusive: bool = False
    unacked: int = 0
    lookahead: int = 0  # more than the prefetch, held by a forwarding node (see above)

    def has_capacity(self, channel_credit: Mapping[str, int]) -> bool:
        if (not self.no_ack and self.prefetch_count
                and self.unacked >= self.prefetch_count + self.lookahead):
            return False
        # Channel credit also carries the socket's back-pressure, which binds
        # no-ack consumers too: only their prefetch (above) does not apply.
        credit = channel_credit.get(self.channel_key)
        return credit is None or credit > 0


class ConsumerRoster:
    def __init__(self, single_active: bool = False) -> None:
        self.single_active = single_active
        self._by_tag: dict[str, Consumer] = {}
        self._registration: list[Consumer] = []
        self._rotation: list[Consumer] = []

    def __len__(self) -> int:
        return len(self._by_tag)

    def __contains__(self, tag: str) -> bool:
        return tag in self._by_tag

    def get(self, tag: str) -> Consumer | None:
        return self._by_tag.get(tag)

    def all(self) -> list[Consumer]:
        return list(self._registration)

    def has_exclusive(self) -> bool:
        return any(consumer.exclusive for consumer in self._registration)

    def add(self, consumer: Consumer) -> None:
        self._by_tag[consumer.tag] = consumer
        self._registration.append(consumer)
        self._rotation.append(consumer)

    def remove(self, tag: str) -> Consumer | None:
        consumer = self._by_tag.pop(tag, None)
        if consumer is not None:
            self._registration.remove(consumer)
            self._rotation.remove(consumer)
        return consumer

    @property
    def active(self) -> Consumer | None:
        """The single active consumer (or None when the queue is not single-active)."""
        if not self.single_active or not self._registration:
            return None
        return self._registration[0]

    def pick(self, channel_credit: Mapping[str, int]) -> Consumer | None:
        """The consumer that gets the next message, or None if nobody can take one."""
        if self.single_active:
            active = self.active
            return active if active and active.has_capacity(channel_credit) else None
        best: Consumer | None = None
        for consumer in self._rotation:
            if (best is None or consumer.priority > best.priority) and consumer.has_capacity(
                channel_credit
            ):
                best = consumer
        return best

    def delivered_to(self, consumer: Consumer) -> None:
        """Move `consumer` to the back of the rotation (round-robin)."""
        if not self.single_active:
            self._rotation.remove(consumer)
            self._rotation.append(consumer)
