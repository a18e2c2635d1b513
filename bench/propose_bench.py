"""The cost of `ReplicatedMetadata.propose` on the leader, Raft taken out.

Run `python bench/propose_bench.py [N]` from a source tree's root (its
`logbroker` is the one measured): N proposals (`AddVhost`) through a leader
whose Raft driver applies each at once, best of 5 rounds, microseconds per
proposal. A real proposal also waits for a Raft commit (a round trip and an
fsync, milliseconds); this measures only what the proposing code adds.
"""

from __future__ import annotations

import asyncio
import sys
import time

from logbroker.cluster.cluster_rpc import ClusterRpc
from logbroker.cluster.replicated_metadata import ReplicatedMetadata
from logbroker.metadata.commands import AddVhost


class InstantRaft:
    """A one-node Raft that applies a proposal as soon as it is made."""

    def __init__(self, metadata: ReplicatedMetadata) -> None:
        self.metadata = metadata
        self.is_leader = True
        self.leader_id = "a"
        self.applied_index = 0

    async def propose(self, data: bytes, timeout_s: float = 5.0) -> object:
        self.applied_index += 1
        return self.metadata.apply(self.applied_index, data)


async def round_us(count: int) -> float:
    metadata = ReplicatedMetadata("a", ClusterRpc(lambda peer, data: True,
                                                  lambda peer, data: None))
    metadata.driver = InstantRaft(metadata)  # type: ignore[assignment]
    started = time.perf_counter()
    for i in range(count):
        await metadata.propose(AddVhost(f"v{i}"))
    return (time.perf_counter() - started) / count * 1e6


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    best = min(asyncio.run(round_us(count)) for _ in range(5))
    print(f"{best:.1f} us per proposal")


if __name__ == "__main__":
    main()
