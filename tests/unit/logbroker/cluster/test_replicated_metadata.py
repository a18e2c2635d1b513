"""`ReplicatedMetadata.propose`: local refusal, leader, forwarding, no leader.

Two nodes' `ReplicatedMetadata` over a back-to-back `ClusterRpc` pair, each
with a fake Raft driver that applies a proposal at once.
"""

import asyncio
import time
from collections.abc import Callable

import pytest

from logbroker.cluster.cluster_rpc import INTERNAL_ERROR, ClusterRpc
from logbroker.cluster.replicated_metadata import ReplicatedMetadata
from logbroker.errors import NOT_FOUND, BrokerError
from logbroker.metadata import Applied
from logbroker.metadata.commands import AddVhost, DeleteVhost
from replication.raft.errors import NotLeader
from replication.raft.proposals import ProposalDropped

pytestmark = pytest.mark.timeout(10)


class FakeDriver:
    """Applies a proposal to its state machine at once, as a one-node Raft would."""

    def __init__(self, node: str, metadata: ReplicatedMetadata) -> None:
        self.node = node
        self.metadata = metadata
        self.is_leader = False
        self.leader_id: str | None = None
        self.applied_index = 0
        self.proposals: list[bytes] = []
        self.waited: list[int] = []
        self.fail_with: Exception | None = None

    async def propose(self, data: bytes, timeout_s: float = 5.0) -> object:
        if not self.is_leader:
            raise NotLeader(self.node, self.leader_id)
        if self.fail_with is not None:
            raise self.fail_with
        self.proposals.append(data)
        self.applied_index += 1
        return self.metadata.apply(self.applied_index, data)

    async def wait_applied(self, index: int, timeout_s: float) -> None:
        self.waited.append(index)


class Nodes:
    def __init__(self, timeout_s: float = 1.0) -> None:
        loop = asyncio.get_running_loop()
        self.rpc: dict[str, ClusterRpc] = {}

        def sender(me: str) -> Callable[[str, bytes], bool]:
            def send(peer: str, payload: bytes) -> bool:
                loop.call_soon(self.rpc[peer].on_frame, me, payload)
                return True
            return send

        self.metadata: dict[str, ReplicatedMetadata] = {}
        self.driver: dict[str, FakeDriver] = {}
        self.applied: dict[str, list[Applied]] = {}
        for name in ("leader", "follower"):
            self.rpc[name] = ClusterRpc(sender(name), lambda peer, data: None)
            metadata = ReplicatedMetadata(name, self.rpc[name], timeout_s)
            self.metadata[name] = metadata
            self.driver[name] = FakeDriver(name, metadata)
            metadata.driver = self.driver[name]  # type: ignore[assignment]
            self.applied[name] = []
            metadata.on_applied = self.applied[name].append
        self.driver["leader"].is_leader = True
        for driver in self.driver.values():
            driver.leader_id = "leader"


async def test_proposing_on_the_leader_applies_there() -> None:
    nodes = Nodes()
    await nodes.metadata["leader"].propose(AddVhost("v1"))
    assert nodes.metadata["leader"].state.vhost("v1") is not None
    assert len(nodes.applied["leader"]) == 1 and nodes.applied["leader"][0].events


async def test_a_follower_forwards_to_the_leader_and_waits_until_applied_here() -> None:
    nodes = Nodes()
    await nodes.metadata["follower"].propose(AddVhost("v2"))
    assert nodes.metadata["leader"].state.vhost("v2") is not None
    assert len(nodes.driver["leader"].proposals) == 1
    assert nodes.driver["follower"].waited == [1]  # the leader's applied index


async def test_a_refusal_is_local_and_needs_no_round_trip() -> None:
    nodes = Nodes()
    with pytest.raises(BrokerError) as raised:
        await nodes.metadata["follower"].propose(DeleteVhost("missing"))
    assert raised.value.reply_code == NOT_FOUND
    assert nodes.driver["leader"].proposals == []


async def test_a_refusal_at_the_leader_comes_back_with_its_code() -> None:
    nodes = Nodes()
    # The follower's (stale) state has a vhost the leader's has not: the follower's
    # check passes, the leader's refuses, and the refusal keeps its code and text.
    nodes.metadata["follower"].state.apply(AddVhost("only-here"))
    with pytest.raises(BrokerError) as raised:
        await nodes.metadata["follower"].propose(DeleteVhost("only-here"))
    assert (raised.value.reply_code, raised.value.text) == (
        NOT_FOUND, "no vhost 'only-here'")
    assert nodes.driver["leader"].proposals == []


async def test_without_a_leader_it_retries_then_refuses_with_541() -> None:
    nodes = Nodes(timeout_s=0.2)
    nodes.driver["leader"].is_leader = False
    for driver in nodes.driver.values():
        driver.leader_id = None
    started = time.monotonic()
    with pytest.raises(BrokerError) as raised:
        await nodes.metadata["follower"].propose(AddVhost("v4"))
    assert 0.15 <= time.monotonic() - started < 2.0
    assert raised.value.reply_code == INTERNAL_ERROR
    assert "no Raft leader" in raised.value.text and "majority" in raised.value.text


async def test_a_leader_appearing_while_retrying_takes_the_proposal() -> None:
    nodes = Nodes(timeout_s=2.0)
    follower = nodes.driver["follower"]
    follower.leader_id = None
    proposing = asyncio.ensure_future(nodes.metadata["follower"].propose(AddVhost("v5")))
    await asyncio.sleep(0.12)
    assert not proposing.done()
    follower.leader_id = "leader"
    await proposing
    assert nodes.metadata["leader"].state.vhost("v5") is not None


async def test_a_dropped_proposal_is_reported_as_of_unknown_outcome() -> None:
    nodes = Nodes()
    nodes.driver["leader"].fail_with = ProposalDropped("leadership moved")
    with pytest.raises(BrokerError) as raised:
        await nodes.metadata["leader"].propose(AddVhost("v6"))
    assert raised.value.reply_code == INTERNAL_ERROR
    assert "may or may not have taken effect" in raised.value.text


async def test_not_started_is_541() -> None:
    nodes = Nodes()
    nodes.metadata["leader"].driver = None
    with pytest.raises(BrokerError) as raised:
        await nodes.metadata["leader"].propose(AddVhost("v7"))
    assert raised.value.reply_code == INTERNAL_ERROR


def test_snapshot_and_restore_round_trip() -> None:
    source = ReplicatedMetadata("a", ClusterRpc(lambda p, b: True, lambda p, b: None))
    source.state.apply(AddVhost("kept", "desc"))
    restored = ReplicatedMetadata("b", ClusterRpc(lambda p, b: True, lambda p, b: None))
    calls: list[bool] = []
    restored.on_restored = lambda: calls.append(True)
    restored.restore(7, source.snapshot())
    assert restored.state.vhost("kept") is not None
    assert calls == [True]


async def test_a_forward_to_a_node_that_just_lost_leadership_is_retried() -> None:
    nodes = Nodes(timeout_s=2.0)
    leader = nodes.driver["leader"]
    leader.is_leader = False  # stepped down; the follower has not heard yet

    async def elected_again() -> None:
        await asyncio.sleep(0.05)
        leader.is_leader = True

    task = asyncio.ensure_future(elected_again())
    await nodes.metadata["follower"].propose(AddVhost("v8"))
    await task
    assert nodes.metadata["leader"].state.vhost("v8") is not None
