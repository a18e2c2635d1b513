"""`ClusterMembership`: adding and removing nodes, and the cluster's status.

Theory of operation. Membership changes are Raft single-server configuration
changes, run by the leader one step at a time (`next_change` towards
`desired_roles`: voters up to five, the rest learners), each committed before
the next. A node is first recorded in the metadata (`AddClusterNode`, so every
node learns its address and dials it), then added to the Raft membership; a
removed node leaves the membership first and the metadata after. A node that
is not the leader forwards the request (`cluster.add_node` /
`cluster.remove_node`); a leader asked to remove itself hands leadership to
another voter first, and the request is then retried at the new leader.

Where a request runs (here on the leader, forwarded to it, retried while
there is none, refused at twice the proposal timeout) is the pure
`MetadataProposals` core's decision, run by a `ProposalDriver` over
`MembershipPorts`, as metadata proposals are.

A node started with `--join` sends `cluster.join` to the members it knows
until one of them answers that it was added.

It works through narrow ports (the RPC, the metadata, the Raft driver, the
transport's connected peers, this node's address, the injected `Clock`),
not the whole cluster node.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from logbroker.cluster.asyncio_ports import LoopTimers, TaskSet
from logbroker.cluster.cluster_rpc import INTERNAL_ERROR, ClusterRpc
from logbroker.cluster.envelope import Envelope
from logbroker.cluster.liveness import NodeAddress
from logbroker.cluster.metadata_proposals import Accepted, MetadataProposals, Outcome, Retry
from logbroker.cluster.proposal_driver import OnOutcome, ProposalDriver
from logbroker.cluster.replicated_metadata import ReplicatedMetadata, outcome_of
from logbroker.cluster_name import cluster_name
from logbroker.errors import NOT_FOUND, PRECONDITION_FAILED, BrokerError
from logbroker.metadata.commands import AddClusterNode, RemoveClusterNode
from replication.raft.driver import RaftDriver
from replication.raft.errors import RaftError
from replication.raft.membership import Membership, desired_roles, next_change
from replication.transport import PeerAddress
from segments.clock import SYSTEM_CLOCK, Clock

logger = logging.getLogger(__name__)
JOIN_RETRY_S = 1.0
LEADER_WAIT_MS = 50


class ClusterMembership:
    def __init__(self, node_name: str, rpc: ClusterRpc, metadata: ReplicatedMetadata,
                 raft: Callable[[], RaftDriver], connected_peers: Callable[[], frozenset[str]],
                 address: Callable[[], NodeAddress], timeout_s: float,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.node_name = node_name
        self._rpc = rpc
        self._metadata = metadata
        self._raft = raft
        self._connected_peers = connected_peers
        self._address = address
        self._timeout_s = timeout_s
        self._clock = clock
        self._requests = ProposalDriver(
            MetadataProposals(int(timeout_s * 2000), LEADER_WAIT_MS, "membership"),
            MembershipPorts(raft, rpc, self._here, LoopTimers(clock), TaskSet()), clock)
        rpc.handle("cluster.add_node", self._serve_add)
        rpc.handle("cluster.remove_node", self._serve_remove)
        rpc.handle("cluster.join", self._serve_add)

    # ------------------------------------------------------------- status

    def status(self) -> dict[str, Any]:
        driver = self._raft()
        membership = driver.membership
        state = self._metadata.state
        leaders = state.queue_leader_counts()
        connected = self._connected_peers()
        nodes = []
        for record in state.cluster_nodes():
            role = ("voter" if record.name in membership.voters
                    else "learner" if record.name in membership.learners else "none")
            nodes.append({
                "name": record.name, "host": record.host, "cluster_port": record.cluster_port,
                "amqp_port": record.amqp_port, "http_port": record.http_port, "role": role,
                "status": "up" if record.up else "down", "since_ms": record.since_ms,
                "connected": record.name == self.node_name or record.name in connected,
                "queue_leaders": leaders.get(record.name, 0),
                "host_id": record.host_id, "zone": record.zone,
            })
        return {
            "cluster_name": cluster_name(state, self.node_name),
            "node": self.node_name, "leader": driver.leader_id, "term": driver.term,
            "commit_index": driver.commit_index, "applied_index": driver.applied_index,
            "nodes": nodes, "hosts": hosts_document(nodes),
        }

    # ------------------------------------------------------- add / remove

    async def add_node(self, name: str, host: str, cluster_port: int,
                       labels: tuple[str, str] = ("", "")) -> None:
        """`labels`: the node's (host_id, zone), when it said them (a join does)."""
        await self._at_leader("cluster.add_node", name, host, cluster_port, labels)

    async def remove_node(self, name: str) -> None:
        if name not in self._raft().membership.nodes and \
                self._metadata.state.cluster_node(name) is None:
            raise BrokerError(NOT_FOUND, f"no cluster node '{name}'")
        await self._at_leader("cluster.remove_node", name, "", 0)

    async def _at_leader(self, op: str, name: str, host: str, port: int,
                         labels: tuple[str, str] = ("", "")) -> None:
        future: asyncio.Future[BrokerError | None] = asyncio.get_running_loop().create_future()

        def done(error: BrokerError | None) -> None:
            if not future.done():
                future.set_result(error)
        self._requests.propose(_encode(op, name, host, port, labels), done)
        error = await future
        if error is not None:
            raise error

    async def _here(self, data: bytes) -> Outcome:
        """On the leader: make the change, or first hand leadership over (a leader
        asked to remove itself), after which the request goes to the new leader."""
        op, name, host, port, labels = _decode(data)
        if op == "cluster.remove_node" and name == self.node_name:
            self._hand_over()
            return Retry()
        await self._change(op, name, host, port, labels)
        return Accepted()

    def _hand_over(self) -> None:
        driver = self._raft()
        others = sorted(driver.membership.voters - {self.node_name})
        if not others:
            raise BrokerError(PRECONDITION_FAILED, "the last voter cannot leave the cluster")
        driver.transfer_leadership(others[0])

    async def _serve_add(self, peer: str, envelope: Envelope) -> Envelope:
        header = envelope.header
        name, host, port = str(header["name"]), str(header["host"]), int(header["cluster_port"])
        # A joining node says its host and zone, so placement knows them from the start.
        labels = (str(header.get("host_id", "")), str(header.get("zone", "")))
        if envelope.op == "cluster.join" or not self._raft().is_leader:
            await self.add_node(name, host, port, labels)
        else:
            await self._change("cluster.add_node", name, host, port, labels)
        return Envelope("ok")

    async def _serve_remove(self, peer: str, envelope: Envelope) -> Envelope:
        await self.remove_node(str(envelope.header["name"]))
        return Envelope("ok")

    async def _change(self, op: str, name: str, host: str, port: int,
                      labels: tuple[str, str] = ("", "")) -> None:
        metadata = self._metadata
        driver = self._raft()
        timeout_s = self._timeout_s
        if op == "cluster.add_node":
            record = metadata.state.cluster_node(name)
            if record is not None and (record.host, record.cluster_port) != (host, port) \
                    and record.up:
                raise BrokerError(PRECONDITION_FAILED,
                                  f"node '{name}' is already a member at "
                                  f"{record.host}:{record.cluster_port}")
            await metadata.propose(AddClusterNode(
                name, host, port, record.amqp_port if record else 0,
                record.http_port if record else 0, self._clock.wall_ms(), *labels))
            wanted = [*sorted(driver.membership.nodes), name]
        else:
            wanted = [n for n in sorted(driver.membership.nodes) if n != name]
        try:
            await self._reach(wanted, timeout_s)
        except RaftError as error:
            raise BrokerError(INTERNAL_ERROR, f"membership change failed: {error}") from None
        if op == "cluster.remove_node" and metadata.state.cluster_node(name) is not None:
            await metadata.propose(RemoveClusterNode(name))
        logger.info("cluster membership is now %s", driver.membership)

    async def _reach(self, wanted: Sequence[str], timeout_s: float) -> None:
        driver = self._raft()
        for _ in range(2 * len(wanted) + 10):  # each step moves one node; bounded
            current: Membership = driver.membership
            change = next_change(current, desired_roles(wanted, current))
            if change is None:
                return
            await driver.propose_config_change(change, timeout_s)
        raise BrokerError(INTERNAL_ERROR, "membership change did not converge")

    # --------------------------------------------------------------- join

    async def join_through(self, seeds: Sequence[PeerAddress]) -> None:
        """Ask the known members to add this node until it is in the membership."""
        address = self._address()
        # Only a committed config that makes this node a voter ends the join without
        # asking: the leader can still replace an uncommitted one (a join that raced
        # another change), and a join adds a learner first and promotes it in a second
        # change that can fail the same way. Asking again is harmless: a member's join
        # changes nothing (a learner by design, past the voter limit, gets its answer).
        while not (self._raft().is_voter(self.node_name)
                   and self._raft().membership_committed):
            for seed in seeds:
                envelope = Envelope("cluster.join", {
                    "name": self.node_name, "host": address.host,
                    "cluster_port": address.cluster_port, "host_id": address.host_id,
                    "zone": address.zone})
                try:
                    await self._rpc.call(seed.name, envelope, self._timeout_s)
                    logger.info("joined the cluster through %s", seed.name)
                    return
                except BrokerError as error:
                    logger.info("joining through %s: %s", seed.name, error.text)
            await asyncio.sleep(JOIN_RETRY_S)


def hosts_document(nodes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The members grouped by machine (`host_id`; a member without one is a machine of
    its own), with the zone and the workers (member names) of each, sorted by host."""
    hosts: dict[str, dict[str, Any]] = {}
    for node in nodes:
        host_id = str(node.get("host_id") or node["name"])
        entry = hosts.setdefault(host_id, {"host_id": host_id, "zone": "", "workers": [],
                                           "up": 0})
        entry["zone"] = entry["zone"] or str(node.get("zone") or "")
        entry["workers"].append(node["name"])
        entry["up"] += node.get("status") == "up"
    return [hosts[key] for key in sorted(hosts)]


def _encode(op: str, name: str, host: str, port: int, labels: tuple[str, str]) -> bytes:
    return json.dumps([op, name, host, port, *labels]).encode()


def _decode(data: bytes) -> tuple[str, str, str, int, tuple[str, str]]:
    op, name, host, port, *labels = json.loads(data)  # no labels from an older node
    host_id, zone = (*labels, "", "")[:2]
    return str(op), str(name), str(host), int(port), (str(host_id), str(zone))


class MembershipPorts:
    """The `ProposalDriver`'s ports for membership requests: the Raft driver, the RPC."""

    def __init__(self, raft: Callable[[], RaftDriver], rpc: ClusterRpc,
                 here: Callable[[bytes], Awaitable[Outcome]], timers: LoopTimers,
                 tasks: TaskSet) -> None:
        self._raft = raft
        self._rpc = rpc
        self._here = here
        self._timers = timers
        self._tasks = tasks

    def leader(self) -> str | None:
        return self._raft().leader_id

    def leading(self) -> bool:
        return self._raft().is_leader

    def propose_here(self, data: bytes, timeout_ms: int, on_outcome: OnOutcome) -> None:
        self._tasks.spawn(outcome_of(self._here(data), on_outcome))

    def forward(self, leader: str, data: bytes, timeout_ms: int,
                on_outcome: OnOutcome) -> None:
        self._tasks.spawn(outcome_of(self._forward(leader, data, timeout_ms), on_outcome))

    def wait_applied(self, index: int, timeout_ms: int, on_outcome: OnOutcome) -> None:
        on_outcome(Accepted())  # the leader answers once the change is made: nothing to wait

    def call_at(self, monotonic_ms: int, action: Callable[[], None]) -> None:
        self._timers.call_at(monotonic_ms, action)

    async def _forward(self, leader: str, data: bytes, timeout_ms: int) -> Outcome:
        op, name, host, port, (host_id, zone) = _decode(data)
        await self._rpc.call(leader, Envelope(op, {"name": name, "host": host,
                                                   "cluster_port": port, "host_id": host_id,
                                                   "zone": zone}), timeout_ms / 1000)
        return Accepted()
