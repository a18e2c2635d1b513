"""A follower copying a backlog rests between fetches; an in-sync one never does
(replication/queue/follower_fetch.py, `FetchTiming.catch_up_lag`), run by the shipped
driver over the cluster's ports.

Three nodes in one process, as in test_cluster_nodes.py (whose `cluster` fixture this uses).
"""

import dataclasses

import pytest

from logbroker.cluster.cluster_node import ClusterNode
from logbroker.metadata import PutPolicy
from replication.queue.follower_fetch import FollowerEffect, FollowerFetch, WaitUntil
from tests.unit.logbroker.cluster.test_cluster_nodes import cluster as cluster  # the fixture
from tests.unit.logbroker.cluster.test_cluster_nodes import (
    persistent,
    publish,
    wait_for,
)
from tests.unit.logbroker.cluster.test_consumer_resubscription import replicated_queue_on_a

pytestmark = pytest.mark.timeout(30)


async def test_a_follower_far_behind_rests_between_fetches(
    cluster: dict[str, ClusterNode], monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, c = cluster["a"], cluster["c"]
    c.followers.driver.timing = dataclasses.replace(c.followers.driver.timing, catch_up_lag=20)
    rests: list[int] = []
    synced = FollowerFetch.synced

    def recorded(self: FollowerFetch, now_ms: int, next_offset: int) -> list[FollowerEffect]:
        effects = synced(self, now_ms, next_offset)
        if self.node == "c":
            rests.extend(e.at_ms - now_ms for e in effects
                         if isinstance(e, WaitUntil) and e.at_ms > now_ms)
        return effects
    monkeypatch.setattr(FollowerFetch, "synced", recorded)
    # Ten records per fetch, so the copy takes several fetches.
    await a.broker.apply(PutPolicy("/", "small-sync", "^backlog$", "queues", 0,
                                   {"ha-mode": "all", "ha-sync-batch-size": 10}))
    await replicated_queue_on_a(cluster, "backlog")
    for index in range(30):  # in sync: no rest, whatever the fetches
        assert await publish(a.broker, "backlog", persistent(b"early-%d" % index))
    assert rests == []

    await c.followers.stop("/", "backlog")
    # Confirmed once c, lacking it for the lag bound, is out of the in-sync set.
    assert await publish(a.broker, "backlog", persistent(b"late-0"))
    assert "c" not in a.metadata.state.queue("/", "backlog").in_sync  # type: ignore[union-attr]
    for index in range(1, 200):  # one at a time: a batch each in the log
        assert await publish(a.broker, "backlog", persistent(b"late-%d" % index))
    c.followers.follow("/", "backlog")
    await wait_for(lambda: (c.followers.copy_status("/", "backlog") or (0, 0))[0] == 230,
                   "c's copy to catch up", 15.0)
    assert len(rests) >= 5 and all(0 < ms <= 500 for ms in rests)
    resting = len(rests)
    assert await publish(a.broker, "backlog", persistent(b"after"))
    await wait_for(lambda: (c.followers.copy_status("/", "backlog") or (0, 0))[0] == 231,
                   "c's copy to take the next message")
    assert len(rests) == resting  # near the end: no rest any more
