"""Leased deliveries of the REST consume-with-acknowledgement API (like SQS's visibility timeout).

Theory of operation
-------------------
A lease is a message taken from a queue by a REST get that wants an ack: the
queue holds it as unacked under the REST channel key, and this table remembers
``tag -> Lease(queue target, offset, owner, deadline)``. The client acks,
nacks or rejects by tag before the deadline; after it, ``expire(now_ms)``
hands the lease back for the shell to requeue (the message is redelivered
with ``redelivered=true``), and a late ack for that tag is unknown.

Invariants: a tag is issued once (a counter); a lease is settled or expired
exactly once (it leaves the table when either happens); only the user that
took a lease may settle it. Pure: time is an argument.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

MAX_LEASES = 1_000_000  # every buffer has a limit: beyond it, gets are refused


class TooManyLeases(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Lease:
    tag: int
    target: Any  # the queue shell: a queue re-declared under the same name is another target
    vhost: str
    queue: str
    offset: int
    owner: str
    deadline_ms: int


class LeaseTable:
    def __init__(self, limit: int = MAX_LEASES) -> None:
        self._next_tag = 1
        self._leases: dict[int, Lease] = {}
        self._deadlines: list[tuple[int, int]] = []  # (deadline, tag); lazily cleaned
        self._limit = limit

    def __len__(self) -> int:
        return len(self._leases)

    def has_room(self, count: int) -> bool:
        return len(self._leases) + count <= self._limit

    def grant(self, target: Any, vhost: str, queue: str, offset: int, owner: str,
              deadline_ms: int) -> Lease:
        if not self.has_room(1):
            raise TooManyLeases(f"more than {self._limit} leases outstanding")
        lease = Lease(self._next_tag, target, vhost, queue, offset, owner, deadline_ms)
        self._next_tag += 1
        self._leases[lease.tag] = lease
        heapq.heappush(self._deadlines, (deadline_ms, lease.tag))
        return lease

    def settle(self, tags: list[int], owner: str, vhost: str, queue: str
               ) -> tuple[list[Lease], list[int]]:
        """Take the leases `tags` names: (settled leases, tags unknown / expired / not ours)."""
        settled: list[Lease] = []
        unknown: list[int] = []
        for tag in tags:
            lease = self._leases.get(tag)
            ours = lease is not None and lease.owner == owner \
                and (lease.vhost, lease.queue) == (vhost, queue)
            if lease is None or not ours:
                unknown.append(tag)
                continue
            del self._leases[tag]
            settled.append(lease)
        return settled, unknown

    def expire(self, now_ms: int) -> list[Lease]:
        expired: list[Lease] = []
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, tag = heapq.heappop(self._deadlines)
            lease = self._leases.pop(tag, None)
            if lease is not None:
                expired.append(lease)
        return expired

    def next_deadline_ms(self) -> int | None:
        while self._deadlines and self._deadlines[0][1] not in self._leases:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None

    def drop_target(self, target: Any) -> None:
        """The queue went away: its leases went with it."""
        for tag in [t for t, lease in self._leases.items() if lease.target is target]:
            del self._leases[tag]
