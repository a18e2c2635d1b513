"""The controller core: liveness, failover elections and replica moves, with explicit now_ms."""

import logging
from typing import TypeVar

from logbroker.cluster.controller import Controller, ControllerConfig
from logbroker.cluster.controller_events import (
    AskStatus,
    ClusterView,
    ControllerEffect,
    HandoverDone,
    Heard,
    LinkLost,
    LinkRestored,
    Notice,
    ProposalDone,
    Propose,
    SendHeartbeat,
    SetTimer,
    StatusAnswered,
    TookOver,
)
from logbroker.cluster.liveness import NodeAddress
from logbroker.metadata import (
    AddClusterNode,
    AddVhost,
    Command,
    DeclareQueue,
    ElectQueueLeader,
    MetadataState,
    PutPolicy,
    RemoveClusterNode,
    SetNodeLiveness,
    SetQueueInSync,
    SetQueuePlacement,
)
from replication.queue.failover import ReplicaStatus

MEMBERS = frozenset({"a", "b", "c"})
TIMEOUT, GRACE, STATUS = 600, 500, 1000
T = TypeVar("T")


def address(name: str) -> NodeAddress:
    return NodeAddress(name, "127.0.0.1", 25672, 5672, 15672)


def cluster(*down: str, replicas: int = 3, leader: str = "b") -> MetadataState:
    state = MetadataState()
    commands: list[Command] = [AddVhost("/")]
    commands += [AddClusterNode(n, "127.0.0.1", 25672, 5672, 15672, 0) for n in sorted(MEMBERS)]
    commands += [SetNodeLiveness(n, False, 1) for n in down]
    members = (leader, *sorted(MEMBERS - {leader}))
    commands.append(DeclareQueue("/", "q", durable=True, leader_node=leader, members=members,
                                 arguments={"x-queue-replicas": replicas}))
    for command in commands:
        state.apply(command)
    return state


class World:
    """What the core is shown: the time, the leadership, the metadata."""

    def __init__(self, state: MetadataState, leading: bool = True) -> None:
        self.now = 10_000
        self.leading = leading
        self.state = state
        self.applied = 1
        self.members = MEMBERS  # the Raft membership

    def view(self) -> ClusterView:
        return ClusterView(self.now, 1_700_000_000_000 + self.now, self.leading,
                           "a" if self.leading else "b", self.members, self.state,
                           self.applied)


def controller() -> Controller:
    return Controller(ControllerConfig("a", TIMEOUT, GRACE, STATUS, 20))


def of(kind: type[T], effects: list[ControllerEffect]) -> list[T]:
    return [effect for effect in effects if isinstance(effect, kind)]


def took_over(core: Controller, world: World) -> None:
    core.step(TookOver(frozenset()), world.view())


# ----------------------------------------------------------------- liveness

def test_only_the_leader_checks_on_a_beat() -> None:
    world = World(cluster(), leading=False)
    core = controller()
    world.now += TIMEOUT * 2
    assert of(Propose, core.beat(world.view(), address("a"))) == []


def test_a_silent_node_is_proposed_down_with_the_wall_time() -> None:
    world = World(cluster())
    core = controller()
    took_over(core, world)
    world.now += TIMEOUT - 1
    core.step(Heard(address("c")), world.view())
    world.now += 1
    proposals = of(Propose, core.beat(world.view(), address("a")))
    assert [p.command for p in proposals] == [SetNodeLiveness("b", False, world.view().wall_ms)]


def test_a_lost_link_is_checked_once_its_grace_ran_out() -> None:
    world = World(cluster())
    core = controller()
    took_over(core, world)
    assert core.step(LinkLost("c"), world.view()) == [SetTimer(world.now + GRACE + 20)]
    world.now += GRACE + 20
    proposals = of(Propose, core.tick(world.view()))
    assert [p.command for p in proposals] == [SetNodeLiveness("c", False, world.view().wall_ms)]


def test_a_link_back_within_its_grace_changes_nothing() -> None:
    world = World(cluster())
    core = controller()
    took_over(core, world)
    core.step(LinkLost("c"), world.view())
    core.step(LinkRestored("c"), world.view())
    world.now += GRACE + 20
    assert of(Propose, core.tick(world.view())) == []


# ----------------------------------------------------------------- failover

def down_leader() -> tuple[Controller, World, list[ControllerEffect]]:
    """b leads q and is recorded down: the controller's beat begins an election."""
    world = World(cluster("b"))
    core = controller()
    took_over(core, world)
    core.step(Heard(address("c")), world.view())
    return core, world, core.beat(world.view(), address("a"))


def test_a_down_leader_gets_one_election_asking_every_other_member() -> None:
    core, world, effects = down_leader()
    asked = of(AskStatus, effects)
    assert sorted(a.member for a in asked) == ["a", "c"]
    assert of(SetTimer, effects) == [SetTimer(world.now + STATUS)]
    assert core.failover.electing == {("/", "q")}
    assert of(AskStatus, core.beat(world.view(), address("a"))) == []  # one at a time


def test_the_election_decides_when_every_member_answered() -> None:
    core, world, effects = down_leader()
    asked = {a.member: a.request for a in of(AskStatus, effects)}
    assert core.step(StatusAnswered(asked["a"], ReplicaStatus("a", 5, 1, 100)),
                     world.view()) == []
    decided = core.step(StatusAnswered(asked["c"], ReplicaStatus("c", 9, 1, 50)), world.view())
    [proposal] = of(Propose, decided)
    assert proposal.command == ElectQueueLeader("/", "q", 1, "c", ("c", "a"),
                                                out_of_sync=False)
    notices = of(Notice, core.step(ProposalDone(proposal.request), world.view()))
    assert core.failover.elections == 1 and core.failover.electing == frozenset()
    assert any("c elected for epoch 2" in n.text for n in notices)


def test_the_election_decides_at_its_deadline_with_what_answered() -> None:
    core, world, effects = down_leader()
    asked = {a.member: a.request for a in of(AskStatus, effects)}
    core.step(StatusAnswered(asked["a"], ReplicaStatus("a", 5, 1, 100)), world.view())
    world.now += STATUS - 1
    assert of(Propose, core.tick(world.view())) == []
    world.now += 1
    [proposal] = of(Propose, core.tick(world.view()))
    assert isinstance(proposal.command, ElectQueueLeader) and proposal.command.leader_node == "a"
    late = core.step(StatusAnswered(asked["c"], ReplicaStatus("c", 9, 1, 50)), world.view())
    assert late == []  # decided once


def test_no_in_sync_answer_leaves_the_queue_and_a_later_check_tries_again() -> None:
    core, world, _ = down_leader()
    world.now += STATUS
    decided = core.tick(world.view())
    assert of(Propose, decided) == []
    assert [n.level for n in of(Notice, decided)] == [logging.WARNING]
    assert core.failover.electing == frozenset()
    assert len(of(AskStatus, core.beat(world.view(), address("a")))) == 2


def test_a_failed_proposal_ends_the_election_uncounted() -> None:
    core, world, effects = down_leader()
    for asked in of(AskStatus, effects):
        decided = core.step(StatusAnswered(asked.request, ReplicaStatus(
            asked.member, 5, 1, 100)), world.view())
    [proposal] = of(Propose, decided)
    core.step(ProposalDone(proposal.request, "no Raft leader"), world.view())
    assert core.failover.elections == 0 and core.failover.electing == frozenset()


def test_promote_on_failure_always_promotes_an_out_of_sync_copy() -> None:
    state = cluster()
    state.apply(SetQueueInSync("/", "q", 1, ("b", "a")))
    state.apply(SetNodeLiveness("b", False, 1))
    state.apply(PutPolicy("/", "p", ".*", definition={"ha-mode": "all",
                                                  "ha-promote-on-failure": "always"}))
    world = World(state)
    core = controller()
    took_over(core, world)
    core.step(Heard(address("c")), world.view())
    asked = {a.member: a.request for a in of(AskStatus, core.beat(world.view(),
                                                                   address("a")))}
    core.step(StatusAnswered(asked["a"], None), world.view())  # the in-sync copy is gone
    [proposal] = of(Propose, core.step(StatusAnswered(
        asked["c"], ReplicaStatus("c", 3, 1, 10)), world.view()))
    assert isinstance(proposal.command, ElectQueueLeader)
    assert proposal.command.leader_node == "c" and proposal.command.out_of_sync
    notices = of(Notice, core.step(ProposalDone(proposal.request), world.view()))
    assert core.failover.out_of_sync_promotions == 1
    assert any("OUT-OF-SYNC" in n.text for n in notices)


def test_liveness_proposals_done_scan_for_failover_at_once() -> None:
    world = World(cluster())
    core = controller()
    took_over(core, world)
    core.step(Heard(address("c")), world.view())
    world.now += TIMEOUT
    core.step(Heard(address("c")), world.view())
    [down] = of(Propose, core.beat(world.view(), address("a")))
    world.state.apply(down.command)
    assert len(of(AskStatus, core.step(ProposalDone(down.request), world.view()))) == 2


# ------------------------------------------------------------- replica moves

def test_a_queue_with_more_members_than_its_policy_drops_one() -> None:
    world = World(cluster(replicas=2))
    core = controller()
    took_over(core, world)
    for name in ("b", "c"):
        core.step(Heard(address(name)), world.view())
    [move] = of(Propose, core.beat(world.view(), address("a")))
    assert move.command == SetQueuePlacement("/", "q", "b", ("b", "a"))
    assert core.mover.moving == {("/", "q")}
    assert of(Propose, core.beat(world.view(), address("a"))) == []  # one step in flight
    core.step(ProposalDone(move.request, "refused"), world.view())
    assert core.mover.moving == frozenset()


def test_an_unchanged_metadata_is_not_scanned_again() -> None:
    world = World(cluster(replicas=2))
    core = controller()
    took_over(core, world)
    for name in ("b", "c"):
        core.step(Heard(address(name)), world.view())
    [move] = of(Propose, core.beat(world.view(), address("a")))
    core.step(HandoverDone(move.request), world.view())
    core.step(ProposalDone(move.request), world.view())
    assert of(Propose, core.beat(world.view(), address("a"))) == []
    world.applied += 1
    assert len(of(Propose, core.beat(world.view(), address("a")))) == 1


def removed(name: str) -> tuple[Controller, World]:
    """`name` left the cluster for good. q (three replicas) is led by b on host hB
    with copies on a (hA) and c; d is another worker of hB, e a host of its own."""
    state = cluster()
    hosts = {"a": "hA", "b": "hB", "c": "hC", "d": "hB", "e": "hE"}
    for node, host in hosts.items():
        state.apply(AddClusterNode(node, "127.0.0.1", 25672, 5672, 15672, 0, host))
    state.apply(RemoveClusterNode(name))
    world = World(state)
    world.members = frozenset(set(hosts) - {name})
    core = controller()
    took_over(core, world)
    for node in world.members - {"a"}:
        core.step(Heard(address(node)), world.view())
    return core, world


def test_a_removed_member_is_replaced_on_a_host_without_a_copy() -> None:
    core, world = removed("c")
    effects = core.beat(world.view(), address("a"))
    [add] = [p for p in of(Propose, effects) if isinstance(p.command, SetQueuePlacement)]
    assert add.command == SetQueuePlacement("/", "q", "b", ("b", "a", "c", "e"))  # d: on hB
    # Once e is in sync, the removed copy goes.
    for command in (add.command, SetQueueInSync("/", "q", 1, ("b", "a", "e"))):
        world.state.apply(command)
    world.applied += 1
    core.step(ProposalDone(add.request), world.view())
    [drop] = [p.command for p in of(Propose, core.beat(world.view(), address("a")))
              if isinstance(p.command, SetQueuePlacement)]
    assert drop == SetQueuePlacement("/", "q", "b", ("b", "a", "e"))


def test_a_removed_leader_fails_over_like_a_down_one() -> None:
    core, world = removed("b")
    asked = of(AskStatus, core.beat(world.view(), address("a")))
    assert sorted(a.member for a in asked) == ["a", "c"]
    # A member merely not recorded yet (still a Raft member) is no reason for an election.
    core, world = removed("b")
    world.members = world.members | {"b"}
    assert of(AskStatus, core.beat(world.view(), address("a"))) == []


# ---------------------------------------------------------- beat, bootstrap

def test_a_node_that_does_not_lead_sends_its_heartbeat_to_the_leader() -> None:
    world = World(cluster(), leading=False)
    assert controller().beat(world.view(), address("c")) == [SendHeartbeat("b", address("c"))]


def test_a_new_controller_bootstraps_an_empty_metadata_one_command_at_a_time() -> None:
    world = World(MetadataState())
    commands = [AddVhost("/"), AddVhost("/two")]
    core = Controller(ControllerConfig("a", TIMEOUT, GRACE, bootstrap=lambda: list(commands)))
    [first] = of(Propose, core.step(TookOver(frozenset()), world.view()))
    assert first.command == commands[0]
    assert of(Propose, core.step(TookOver(frozenset()), world.view())) == []  # under way
    [second] = of(Propose, core.step(ProposalDone(first.request, "refused"), world.view()))
    assert second.command == commands[1]
    assert core.step(ProposalDone(second.request), world.view()) == []


def test_a_metadata_with_its_default_vhost_is_not_bootstrapped() -> None:
    world = World(cluster())
    core = Controller(ControllerConfig("a", TIMEOUT, GRACE, bootstrap=lambda: [AddVhost("/")]))
    assert of(Propose, core.step(TookOver(frozenset()), world.view())) == []
