"""`QueueHandover` over its narrow ports (no `ClusterNode`), its time on a `ManualClock`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pytest

from logbroker.cluster.cluster_rpc import ClusterRpc
from logbroker.cluster.envelope import Envelope
from logbroker.cluster.local_queues import LocalQueues
from logbroker.cluster.queue_handover import LEAVING_FOR_S, HandoverPorts, QueueHandover
from logbroker.errors import PRECONDITION_FAILED, BrokerError
from logbroker.metadata import AddClusterNode, Command, MetadataState, QueueRecord
from logbroker.queue.replication_gate import ReplicationGate
from segments.clock import ManualClock

RECORD = QueueRecord("/", "q", True, None, False, leader_node="a", members=("a", "b", "c"),
                     epoch=1, in_sync=("a", "b", "c"))


@dataclass
class Counts:
    elections: int = 3
    out_of_sync_promotions: int = 1


class NoProgress:
    def progress(self, member: str) -> None:
        return None


@dataclass
class Gate:
    leader: NoProgress


async def nothing_proposed(command: Command) -> None:
    raise AssertionError(f"nothing is proposed here: {command}")


def handover(clock: ManualClock) -> QueueHandover:
    state = MetadataState()
    for index, name in enumerate("abc"):
        state.apply(AddClusterNode(name, f"host{name}", 25672, 5672 + index, 15672, 100))
    rpc = ClusterRpc(lambda peer, data: True, lambda peer, data: None)
    return QueueHandover(HandoverPorts(
        "a", rpc, lambda: cast(LocalQueues, None), lambda: state, nothing_proposed,
        lambda: frozenset({"b", "c"}), Counts, clock))


def target(host: QueueHandover, wanted: str | None) -> str:
    gate = cast(ReplicationGate, Gate(NoProgress()))
    return host._target(RECORD, gate, wanted, always=False)


def test_a_peer_that_said_it_is_leaving_is_no_target_until_its_time_is_up() -> None:
    clock = ManualClock()
    host = handover(clock)
    assert target(host, "b") == "b"
    host._peer_leaving("b", Envelope("cluster.leaving", {}))
    with pytest.raises(BrokerError) as refused:
        target(host, "b")
    assert refused.value.reply_code == PRECONDITION_FAILED
    assert target(host, None) == "c"  # the one that is staying
    clock.advance(int(LEAVING_FOR_S * 1000) - 1)
    with pytest.raises(BrokerError):
        target(host, "b")
    clock.advance(1)
    assert target(host, "b") == "b"


def test_the_counters_read_the_controllers_elections_through_the_port() -> None:
    counters: dict[str, Any] = handover(ManualClock()).replication_counters()
    assert counters == {"elections": 3, "out_of_sync_promotions": 1, "handovers": 0}
