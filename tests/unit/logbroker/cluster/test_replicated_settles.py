"""A transaction's acks on a replicated queue led by another node: `settles_durable` on
the client's node returns once the leader's in-sync followers hold them.

Three nodes in one process, as in test_cluster_nodes.py (whose `cluster` fixture this uses).
"""

import pytest

from logbroker.cluster.cluster_node import ClusterNode
from logbroker.cluster.remote_queue import RemoteQueue
from tests.unit.logbroker.cluster.test_cluster_nodes import cluster as cluster  # the fixture
from tests.unit.logbroker.cluster.test_cluster_nodes import (
    persistent,
    publish,
    session,
    shell_of,
)
from tests.unit.logbroker.cluster.test_consumer_resubscription import replicated_queue_on_a

pytestmark = pytest.mark.timeout(30)


async def test_forwarded_acks_are_durable_once_the_in_sync_followers_hold_them(
    cluster: dict[str, ClusterNode],
) -> None:
    b = cluster["b"]
    await replicated_queue_on_a(cluster, "tx")
    assert await publish(b.broker, "tx", persistent(b"one"))
    got = await b.broker.consuming.get(session(b), "tx", "conn-b:1", no_ack=False)
    assert got is not None
    offset, endpoint = got[0], got[4]
    assert isinstance(endpoint, RemoteQueue) and endpoint.node == "a"
    gate = shell_of(cluster["a"], "tx").replication
    assert gate is not None
    before = gate.acked_version
    endpoint.ack([offset])
    await endpoint.settles_durable()
    assert shell_of(cluster["a"], "tx").cursor.ack_floor == offset + 1
    assert gate.acked_version > before
    assert gate.leader.acked_version_in_sync(gate.acked_version) >= gate.acked_version
