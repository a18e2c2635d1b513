"""The fetch a follower sends its queue's leader, and the leader's answers (pure data).

A follower pulls (`FetchRequest`): the queue's epoch as it knows it, its
next offset (everything below is durable on its disk: the leader counts it as
persisted), the last epoch it holds, its log start, the version of the acked
range set it holds and the high watermark it heard last. The leader answers
with one of the `ReplicationLeader` verdicts: `StreamAnswer` (the batches from
that offset that are durable on the leader, the epoch history, its log start
and high watermark, and the whole acked range set when the follower's version
is old), `Truncate`, `Reset` or `Refuse`.

The wire form (the `r.fetch` envelope) is the cluster link's business
(logbroker/cluster/fetch_wire.py); the cores on both ends see only these.
"""

from __future__ import annotations

from dataclasses import dataclass

from replication.queue.epoch_history import EpochStart
from replication.queue.replication_leader import Refuse, Reset, Truncate

AckedRanges = tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class FetchRequest:
    epoch: int
    next_offset: int
    last_epoch: int
    log_start: int
    acked_version: int
    high_watermark: int


@dataclass(frozen=True, slots=True)
class StreamAnswer:
    high_watermark: int
    log_start: int
    epochs: tuple[EpochStart, ...]
    acked_version: int
    acked: AckedRanges | None  # None: the follower's version is current
    batches: tuple[bytes, ...] = ()


FetchAnswer = StreamAnswer | Truncate | Reset | Refuse
