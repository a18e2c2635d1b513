"""Fencing what travels over a cluster link: forwarded publishes carry the epoch their
sender believed, forwarded acks the link generation of the delivery they answer, and a
consume whose channel closed meanwhile leaves nothing behind on the leader.

Three nodes in one process, as in test_cluster_nodes.py (whose `cluster` fixture this uses).
"""

import asyncio
import logging

import pytest

from logbroker import definitions
from logbroker.cluster.cluster_node import ClusterNode
from tests.unit.logbroker.cluster.test_cluster_nodes import cluster as cluster  # the fixture
from tests.unit.logbroker.cluster.test_cluster_nodes import (
    persistent,
    session,
    shell_of,
    wait_for,
)

pytestmark = pytest.mark.timeout(30)
REPLICATED = {"x-queue-replicas": 3, "x-queue-leader-locator": "client-local"}


async def _replicated_on_a(cluster: dict[str, ClusterNode], name: str) -> None:
    a = cluster["a"]
    await definitions.declare_queue(a.broker, session(a), name, durable=True,
                                    arguments=REPLICATED)

    def in_sync_everywhere() -> bool:
        records = [node.metadata.state.queue("/", name) for node in cluster.values()]
        return all(r is not None and r.leader_node == "a" and sorted(r.in_sync) == ["a", "b", "c"]
                   for r in records)
    await wait_for(in_sync_everywhere, "the queue led by a with every replica in sync")


async def test_a_publish_forwarded_to_a_leader_fenced_meanwhile_is_nacked_without_an_error(
    cluster: dict[str, ClusterNode], monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, c = cluster["a"], cluster["c"]
    await _replicated_on_a(cluster, "fenced")
    gate = shell_of(a, "fenced").replication
    assert gate is not None
    real_confirm = gate.confirm_when_replicated

    def fenced_first(base_offset: int, next_offset: int) -> asyncio.Future[int]:
        # The epoch moves on between the write and its confirm.
        gate.fence("a newer epoch was elected")
        return real_confirm(base_offset, next_offset)

    monkeypatch.setattr(gate, "confirm_when_replicated", fenced_first)
    message = persistent(b"too late")
    message.routing_key = "fenced"
    with caplog.at_level(logging.INFO):
        assert await c.remote_queues.publish("/", [(message, ["fenced"])]) == [False]
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert errors == [], [r.getMessage() for r in errors]
    assert any("not confirmed" in r.getMessage() and r.name.endswith("queue_host")
               for r in caplog.records)
