"""`QueueHost` over its narrow ports (no `ClusterNode`)."""

from __future__ import annotations

import pytest

from logbroker.cluster.cluster_rpc import ClusterRpc
from logbroker.cluster.envelope import Envelope
from logbroker.cluster.local_queues import LocalQueues, RoleChanges, RoutedPublisher
from logbroker.cluster.queue_host import HostPorts, QueueHost
from logbroker.errors import NOT_FOUND, BrokerError
from logbroker.metadata import MetadataState
from logbroker.queue.queue_shell import QueueShell


class NoQueues:
    """A node that runs no queue."""

    roles: RoleChanges | None = None

    @property
    def publisher(self) -> RoutedPublisher:
        raise AssertionError("nothing is published here")

    def queue(self, vhost: str, name: str) -> QueueShell | None:
        return None

    def all_queues(self) -> list[QueueShell]:
        return []

    def leads_queue(self, vhost: str, name: str) -> bool:
        return False


def host(waited: list[int]) -> QueueHost:
    async def wait_applied(index: int) -> None:
        waited.append(index)

    queues: LocalQueues = NoQueues()
    state = MetadataState()
    rpc = ClusterRpc(lambda peer, data: True, lambda peer, data: None)
    return QueueHost(HostPorts("a", rpc, lambda: queues, lambda: state, wait_applied,
                               started_ms=1_700_000_000_000))


async def test_a_request_waits_for_the_metadata_the_sender_applied_first() -> None:
    waited: list[int] = []
    with pytest.raises(BrokerError) as missing:
        await host(waited)._counts("b", Envelope("q.counts", {"v": "/", "q": "q", "a": 7}))
    assert missing.value.reply_code == NOT_FOUND and "on node a" in missing.value.reply_text
    assert waited == [7]


def test_link_generations_start_at_the_start_time_and_move_on_a_break() -> None:
    queue_host = host([])
    assert queue_host.generation("b") == 1_700_000_000_000
    queue_host.peer_down("b")
    assert queue_host.generation("b") == 1_700_000_000_001
    assert queue_host.generation("c") == 1_700_000_000_000
