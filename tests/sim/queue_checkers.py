"""The total-queue checker of the queue simulation: one `Ledger` per queue.

It watches the clients and the leaders as the run goes:

- every payload is unique (`<queue>/<n>`) and recorded when a publisher sends it;
- a delivery of a payload never published is unexpected;
- a payload delivered again must come flagged redelivered, and always from
  the same offset (messages never move: two offsets would mean two copies);
- whenever a leader's high watermark passes an offset (or a new leader starts
  with one), the record there is committed: it must be the record every
  earlier leader committed there (the committed prefix never changes);
- a confirmed payload must have been committed somewhere.

At the end (`check_final`): lost = 0 (every confirmed payload was delivered
at least once), unexpected = 0; and (`check_replicas`) the replicas' logs are
identical below the high watermark, and hold what was committed there.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from segments.log import Log
from tests.sim.checkers import InvariantViolation
from tests.sim.queue_leader import LeaderReplica


@dataclass
class Ledger:
    queue: str
    check_redelivered: bool = True  # off: a duplicate without the flag is only counted
    published: set[bytes] = field(default_factory=set)
    confirmed: set[bytes] = field(default_factory=set)
    nacked: set[bytes] = field(default_factory=set)
    delivered: dict[bytes, int] = field(default_factory=dict)  # payload -> its offset
    committed: dict[int, bytes] = field(default_factory=dict)  # offset -> payload
    committed_at: dict[bytes, int] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    seen: Counter[int] = field(default_factory=Counter)  # deliveries per offset

    def payload(self, number: int) -> bytes:
        return f"{self.queue}/{number}".encode()

    def on_publish(self, payload: bytes) -> None:
        self.published.add(payload)
        self.counts["published"] += 1

    def on_confirm(self, payload: bytes, ok: bool) -> None:
        if not ok:
            self.nacked.add(payload)
            self.counts["nacked"] += 1
            return
        if payload not in self.committed_at:
            raise InvariantViolation(f"{self.queue}: {payload!r} was confirmed but no leader "
                                     "committed it (below its high watermark)")
        self.confirmed.add(payload)
        self.counts["confirmed"] += 1

    def on_committed(self, node: str, offset: int, payload: bytes) -> None:
        known = self.committed.setdefault(offset, payload)
        if known != payload:
            raise InvariantViolation(
                f"{self.queue}: {node} holds {payload!r} at offset {offset} below its high "
                f"watermark, but {known!r} was committed there before")
        if payload not in self.published:
            raise InvariantViolation(f"{self.queue}: {node} committed {payload!r}, which "
                                     "nobody published")
        where = self.committed_at.setdefault(payload, offset)
        if where != offset:
            raise InvariantViolation(f"{self.queue}: {payload!r} committed at offsets {where} "
                                     f"and {offset}")

    def on_delivery(self, consumer: str, node: str, offset: int, payload: bytes,
                    redelivered: bool) -> None:
        self.counts["deliveries"] += 1
        if payload not in self.published:
            self.counts["unexpected"] += 1
            raise InvariantViolation(f"{self.queue}: {consumer} got {payload!r} from {node}, "
                                     "which nobody published")
        if self.committed.get(offset) != payload:
            raise InvariantViolation(
                f"{self.queue}: {node} delivered {payload!r} at offset {offset}, which is "
                f"not what was committed there ({self.committed.get(offset)!r})")
        first = self.delivered.setdefault(payload, offset)
        if first != offset:
            raise InvariantViolation(f"{self.queue}: {payload!r} delivered from offsets "
                                     f"{first} and {offset}")
        if redelivered:
            self.counts["redelivered"] += 1
        elif self.seen[offset]:
            self.counts["unflagged_duplicates"] += 1
            if self.check_redelivered:
                raise InvariantViolation(
                    f"{self.queue}: {node} delivered {payload!r} (offset {offset}) to "
                    f"{consumer} again without the redelivered flag")
        self.seen[offset] += 1

    def lost(self) -> list[bytes]:
        return sorted(self.confirmed - set(self.delivered))

    def check_final(self) -> None:
        lost = self.lost()
        if lost:
            shown = ", ".join(p.decode() for p in lost[:8])
            raise InvariantViolation(f"{self.queue}: lost {len(lost)} confirmed messages "
                                     f"(never delivered after the final drain): {shown}")
        confirmed_nacked = self.confirmed & self.nacked
        if confirmed_nacked:
            raise InvariantViolation(f"{self.queue}: {len(confirmed_nacked)} messages were "
                                     "both confirmed and nacked")

    def summary(self) -> dict[str, int]:
        duplicates = sum(count - 1 for count in self.seen.values())
        return {**self.counts, "duplicates": duplicates, "lost": len(self.lost()),
                "unexpected": self.counts["unexpected"],
                "delivered": len(self.delivered)}


def check_replicas(ledger: Ledger, leader: str, shell: LeaderReplica,
                   followers: dict[str, Log]) -> None:
    """After the drain: the leader's log below its high watermark holds what was committed,
    and every follower's log holds the same records there, and ends where the leader's does."""
    name, hw = ledger.queue, shell.gate.high_watermark
    expected = _records(shell.log, hw)
    for offset, payload in expected.items():
        if ledger.committed.get(offset, payload) != payload:
            raise InvariantViolation(
                f"{name}: the leader {leader} holds {payload!r} at {offset}, but "
                f"{ledger.committed[offset]!r} was committed there")
    for member, log in sorted(followers.items()):
        got = _records(log, hw)
        diff = sorted(o for o in set(got) & set(expected) if got[o] != expected[o])
        if diff:
            raise InvariantViolation(
                f"{name}: {member}'s log differs from the leader {leader}'s below the high "
                f"watermark {hw}, first at {diff[0]}: {got[diff[0]]!r} vs "
                f"{expected[diff[0]]!r}")
        if log.next_offset != shell.log.next_offset:
            raise InvariantViolation(f"{name}: {member} ends at {log.next_offset}, the "
                                     f"leader {leader} at {shell.log.next_offset}")


def _records(log: Log, end: int) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    offset = log.log_start_offset
    while offset < min(end, log.next_offset):
        records = log.read(offset, 4096)
        for record in records:
            if record.offset < end:
                found[record.offset] = record.value
        offset = records[-1].offset + 1
    return found
