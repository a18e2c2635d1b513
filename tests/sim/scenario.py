"""What a simulation run is given (`SimParams`, drawn from its seed) and what it reports."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from replication.raft import RaftConfig


@dataclass(frozen=True)
class SimParams:
    founders: int
    chaos_ticks: int
    loss: float
    duplicate: float
    max_delay: int
    crash_rate: float
    mid_save_crash_rate: float
    partition_rate: float
    propose_rate: float
    compact_rate: float
    transfer_rate: float
    membership_change: bool
    config: RaftConfig
    # Bounds of the liveness phase, in ticks.
    elect_within: int = 300
    commit_within: int = 150

    @classmethod
    def draw(cls, rng: random.Random, chaos_ticks: int = 400) -> SimParams:
        # Pre-vote or check-quorum must be on: without either, a node that was
        # removed without learning it keeps deposing leaders (Raft thesis 4.2.3).
        prevote = rng.random() < 0.8
        max_entries = rng.choice((1, 4, 64))
        return cls(
            founders=rng.choice((3, 3, 5)),
            chaos_ticks=chaos_ticks,
            loss=rng.choice((0.0, 0.02, 0.1)),
            duplicate=rng.choice((0.0, 0.02, 0.05)),
            max_delay=rng.choice((1, 2, 4)),
            crash_rate=rng.choice((0.0, 0.002, 0.006)),
            mid_save_crash_rate=rng.choice((0.0, 0.002)),
            partition_rate=rng.choice((0.0, 0.005, 0.015)),
            propose_rate=rng.choice((0.1, 0.3)),
            compact_rate=rng.choice((0.0, 0.02)),
            transfer_rate=rng.choice((0.0, 0.01)),
            membership_change=rng.random() < 0.5,
            config=RaftConfig(
                election_ticks=10,
                heartbeat_ticks=rng.choice((1, 2)),
                max_entries_per_append=max_entries,
                # One entry per round trip would make catching up take too long
                # for the liveness bound.
                max_inflight=4 if max_entries == 1 else rng.choice((1, 4)),
                prevote=prevote,
                check_quorum=not prevote or rng.random() < 0.8,
            ),
        )


@dataclass
class SimResult:
    seed: int
    params: SimParams
    ticks: int
    stats: Counter[str]
    trace: list[str]
    final: dict[str, str]

    def summary(self) -> str:
        p = self.params
        lines = [
            f"seed {self.seed}: {p.founders} founders, {self.ticks} ticks, "
            f"loss={p.loss} dup={p.duplicate} delay<={p.max_delay} crash={p.crash_rate} "
            f"partition={p.partition_rate} membership={p.membership_change} "
            f"prevote={p.config.prevote} check_quorum={p.config.check_quorum}",
            "stats: " + ", ".join(f"{k}={v}" for k, v in sorted(self.stats.items())),
            *(f"  {node}: {state}" for node, state in sorted(self.final.items())),
        ]
        return "\n".join(lines)
