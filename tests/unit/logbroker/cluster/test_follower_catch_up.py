"""A follower copying a backlog rests between fetches; an in-sync one never does
(queue_followers.py, `CATCH_UP_LAG`).

Three nodes in one process, as in test_cluster_nodes.py (whose `cluster` fixture this uses).
"""

import pytest

from logbroker.cluster import queue_followers
from logbroker.cluster.cluster_node import ClusterNode
from logbroker.metadata import PutPolicy
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
    monkeypatch.setattr(queue_followers, "CATCH_UP_LAG", 20)
    rests: list[float] = []
    rest = queue_followers.QueueFollowers._rest

    async def recorded(self: queue_followers.QueueFollowers, key: tuple[str, str],
                       seconds: float) -> None:
        if self is c.followers:
            rests.append(seconds)
        await rest(self, key, seconds)
    monkeypatch.setattr(queue_followers.QueueFollowers, "_rest", recorded)
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
    assert len(rests) >= 5 and all(0 < seconds <= 0.5 for seconds in rests)
    resting = len(rests)
    assert await publish(a.broker, "backlog", persistent(b"after"))
    await wait_for(lambda: (c.followers.copy_status("/", "backlog") or (0, 0))[0] == 231,
                   "c's copy to take the next message")
    assert len(rests) == resting  # near the end: no rest any more
