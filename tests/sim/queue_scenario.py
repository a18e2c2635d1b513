"""What a queue-simulation run is given (`QueueSimParams`, drawn from its seed) and reports.

Times are in ticks; the pure cores see `now_ms = tick`, so `lag_max_ms` and
the session timeout are in ticks too. The Raft election timeout is 10 ticks:
the session timeout is longer, so a Raft leader change alone does not make
the controller declare nodes down.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from replication.raft import RaftConfig


@dataclass(frozen=True)
class QueueSimParams:
    queues: int
    chaos_ticks: int
    loss: float
    duplicate: float
    max_delay: int
    crash_rate: float
    partition_rate: float
    flush_rate: float  # chance per tick that a leader's group commit completes
    max_sync_delay: int  # ticks a follower's fsync may take
    publish_rate: float
    consumers: int
    prefetch: int
    ack_delay: int
    close_rate: float  # chance per tick that a consumer closes its channel
    session_timeout: int
    link_grace: int  # a broken link (a crashed node) counts as down after this
    heartbeat_every: int
    lag_max: int
    raft: RaftConfig
    converge_within: int = 400
    drain_within: int = 300

    @classmethod
    def draw(cls, rng: random.Random, chaos_ticks: int = 250,
             queues: int | None = None) -> QueueSimParams:
        prevote = rng.random() < 0.7
        return cls(
            queues=queues if queues is not None else rng.choice((1, 1, 2)),
            chaos_ticks=chaos_ticks,
            loss=rng.choice((0.0, 0.02, 0.08)),
            duplicate=rng.choice((0.0, 0.02, 0.05)),
            max_delay=rng.choice((1, 2, 4)),
            crash_rate=rng.choice((0.0, 0.003, 0.006, 0.01)),
            partition_rate=rng.choice((0.0, 0.008, 0.02)),
            flush_rate=rng.choice((0.4, 0.8, 1.0)),
            max_sync_delay=rng.choice((0, 1, 3)),
            publish_rate=rng.choice((0.3, 0.6)),
            consumers=rng.choice((1, 2)),
            prefetch=rng.choice((0, 2, 8)),
            ack_delay=rng.choice((1, 8, 30)),
            close_rate=rng.choice((0.0, 0.0, 0.01)),
            session_timeout=rng.choice((15, 25)),
            link_grace=rng.choice((3, 6)),
            heartbeat_every=rng.choice((2, 3)),
            lag_max=rng.choice((14, 20, 40)),
            raft=RaftConfig(
                election_ticks=10,
                heartbeat_ticks=rng.choice((1, 2)),
                max_entries_per_append=64,
                max_inflight=4,
                prevote=prevote,
                check_quorum=not prevote or rng.random() < 0.8,
            ),
        )


@dataclass
class QueueSimResult:
    seed: int
    params: QueueSimParams
    ticks: int
    stats: Counter[str]
    queues: dict[str, dict[str, int]]
    trace: list[str]
    final: dict[str, str]

    def summary(self) -> str:
        p = self.params
        lines = [
            f"seed {self.seed}: {p.queues} queue(s), {self.ticks} ticks, loss={p.loss} "
            f"dup={p.duplicate} delay<={p.max_delay} crash={p.crash_rate} "
            f"partition={p.partition_rate} flush={p.flush_rate} session={p.session_timeout} "
            f"lag_max={p.lag_max} prefetch={p.prefetch} ack_delay<={p.ack_delay}",
            "stats: " + ", ".join(f"{k}={v}" for k, v in sorted(self.stats.items())),
            *(f"  {queue}: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
              for queue, counts in sorted(self.queues.items())),
            *(f"  {node}: {state}" for node, state in sorted(self.final.items())),
        ]
        return "\n".join(lines)
