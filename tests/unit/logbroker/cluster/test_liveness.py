"""The controller's liveness view: which AddClusterNode / SetNodeLiveness it proposes."""


from logbroker.cluster.liveness import LivenessTracker, NodeAddress
from logbroker.metadata.commands import AddClusterNode, SetNodeLiveness
from logbroker.metadata.records import ClusterNodeRecord

TIMEOUT = 600
MEMBERS = ("a", "b", "c")


def address(name: str, host: str = "127.0.0.1", cluster_port: int = 25672,
            amqp_port: int = 5672, http_port: int = 15672) -> NodeAddress:
    return NodeAddress(name, host, cluster_port, amqp_port, http_port)


def record(name: str, up: bool = True, host: str = "127.0.0.1", cluster_port: int = 25672,
           amqp_port: int = 5672, http_port: int = 15672, since_ms: int = 0
           ) -> ClusterNodeRecord:
    return ClusterNodeRecord(name, host, cluster_port, amqp_port, http_port, up, since_ms)


def all_up(*names: str) -> list[ClusterNodeRecord]:
    return [record(name) for name in names or MEMBERS]


def keep_alive(tracker: LivenessTracker, now: int) -> None:
    tracker.heard(address("b"), now)
    tracker.heard(address("c"), now)


def controller(now: int = 1000) -> LivenessTracker:
    tracker = LivenessTracker("a", TIMEOUT)
    tracker.took_over(MEMBERS, now)
    return tracker


def test_grace_period_after_taking_over() -> None:
    tracker = controller(now=1000)
    # Nobody was heard yet, but nobody is declared down within the session timeout.
    for now in (1000, 1300, 1000 + TIMEOUT - 1):
        assert tracker.decide(MEMBERS, all_up(), now) == []
        assert tracker.is_alive("b", now) and tracker.is_alive("c", now)
    now = 1000 + TIMEOUT
    assert tracker.decide(MEMBERS, all_up(), now) == [
        SetNodeLiveness("b", False, now), SetNodeLiveness("c", False, now)]


def test_nodes_heard_in_time_stay_up() -> None:
    tracker = controller(now=0)
    for now in range(100, 5000, 100):
        keep_alive(tracker, now)
        assert tracker.decide(MEMBERS, all_up(), now) == []


def test_silent_node_is_proposed_down_once_until_the_timeout_passed() -> None:
    tracker = controller(now=0)
    tracker.heard(address("b"), 1000)
    tracker.heard(address("c"), 1000)
    tracker.heard(address("c"), 1500)
    assert tracker.decide(MEMBERS, all_up(), 1000 + TIMEOUT - 1) == []
    down_at = 1000 + TIMEOUT
    assert tracker.decide(MEMBERS, all_up(), down_at) == [SetNodeLiveness("b", False, down_at)]
    # The proposal is in flight (the record still says up): not proposed again...
    for now in (down_at + 1, down_at + 100, down_at + TIMEOUT - 1):
        tracker.heard(address("c"), now)
        assert tracker.decide(MEMBERS, all_up(), now) == []
    # ...until the session timeout passed without it taking effect.
    now = down_at + TIMEOUT
    tracker.heard(address("c"), now)
    assert tracker.decide(MEMBERS, all_up(), now) == [SetNodeLiveness("b", False, now)]


def test_once_recorded_down_nothing_more_is_proposed() -> None:
    tracker = controller(now=0)
    recorded = [record("a"), record("b", up=False), record("c", up=False)]
    for now in (TIMEOUT, 10 * TIMEOUT, 100 * TIMEOUT):
        assert tracker.decide(MEMBERS, recorded, now) == []


def test_a_node_heard_again_comes_back_up() -> None:
    tracker = controller(now=0)
    recorded = [record("a"), record("b", up=False), record("c")]
    tracker.heard(address("c"), 5000)
    assert tracker.decide(MEMBERS, recorded, 5000) == []  # b is silent and already down
    tracker.heard(address("b"), 5100)
    assert tracker.decide(MEMBERS, recorded, 5100) == [SetNodeLiveness("b", True, 5100)]
    assert tracker.decide(MEMBERS, recorded, 5200) == []  # in flight
    assert tracker.is_alive("b", 5100 + TIMEOUT - 1)
    assert not tracker.is_alive("b", 5100 + TIMEOUT)


def test_down_up_down_is_proposed_each_time() -> None:
    tracker = controller(now=0)
    t1 = TIMEOUT
    assert SetNodeLiveness("b", False, t1) in tracker.decide(MEMBERS, all_up(), t1)
    tracker.heard(address("b"), t1 + 10)
    assert SetNodeLiveness("b", True, t1 + 10) in tracker.decide(
        MEMBERS, [record("a"), record("b", up=False), record("c", up=False)], t1 + 10)
    t2 = t1 + 10 + TIMEOUT
    assert SetNodeLiveness("b", False, t2) in tracker.decide(
        MEMBERS, [record("a"), record("b"), record("c", up=False)], t2)


def test_the_controller_never_declares_itself_down() -> None:
    tracker = controller(now=0)
    assert tracker.is_alive("a", 10**9)
    for now in (TIMEOUT, 10 * TIMEOUT, 10**9):
        commands = tracker.decide(MEMBERS, all_up(), now)
        assert all(command.name != "a" for command in commands)
    # A previous controller's "down" for this node is corrected.
    recorded = [record("a", up=False), record("b", up=False), record("c", up=False)]
    assert tracker.decide(MEMBERS, recorded, 10**9 + 1) == [SetNodeLiveness("a", True, 10**9 + 1)]


def test_the_controller_never_heard_of_itself_is_alive_without_took_over() -> None:
    tracker = LivenessTracker("a", TIMEOUT)
    assert tracker.is_alive("a", 0)
    assert not tracker.is_alive("b", 0)  # never heard, no grace given


def test_registers_a_member_heard_but_missing_from_the_metadata() -> None:
    tracker = controller(now=0)
    members = (*MEMBERS, "d")
    d = address("d", host="10.0.0.4", cluster_port=25673, amqp_port=5673, http_port=15673)
    tracker.heard(d, 100)
    assert tracker.decide(members, all_up(), 100) == [
        AddClusterNode("d", "10.0.0.4", 25673, 5673, 15673, 100)]
    # Not proposed again while in flight, then again if it still is not recorded.
    tracker.heard(d, 200)
    assert tracker.decide(members, all_up(), 200) == []
    tracker.heard(d, 100 + TIMEOUT)
    keep_alive(tracker, 100 + TIMEOUT)
    assert tracker.decide(members, all_up(), 100 + TIMEOUT) == [
        AddClusterNode("d", "10.0.0.4", 25673, 5673, 15673, 100 + TIMEOUT)]
    # Once recorded (at that address), nothing more.
    recorded = [*all_up(), record("d", host="10.0.0.4", cluster_port=25673, amqp_port=5673,
                                  http_port=15673)]
    tracker.heard(d, 100 + TIMEOUT + 50)
    keep_alive(tracker, 100 + TIMEOUT + 50)
    assert tracker.decide(members, recorded, 100 + TIMEOUT + 50) == []


def test_a_member_neither_heard_nor_recorded_is_left_alone() -> None:
    tracker = controller(now=0)
    for now in (0, 10 * TIMEOUT):
        keep_alive(tracker, now)
        assert tracker.decide((*MEMBERS, "d"), all_up(), now) == []


def test_updates_a_moved_address() -> None:
    tracker = controller(now=0)
    moved = address("b", host="10.0.0.22", cluster_port=30000)
    tracker.heard(moved, 100)
    tracker.heard(address("c"), 100)
    assert tracker.decide(MEMBERS, all_up(), 100) == [
        AddClusterNode("b", "10.0.0.22", 30000, 5672, 15672, 100)]
    assert tracker.decide(MEMBERS, all_up(), 150) == []  # in flight
    recorded = [record("a"), record("b", host="10.0.0.22", cluster_port=30000), record("c")]
    assert tracker.decide(MEMBERS, recorded, 200) == []


def test_any_changed_port_is_a_move() -> None:
    for changed in (address("b", amqp_port=1), address("b", http_port=2),
                    address("b", cluster_port=3), address("b", host="other")):
        tracker = controller(now=0)
        tracker.heard(changed, 10)
        commands = tracker.decide(MEMBERS, all_up(), 10)
        assert commands == [AddClusterNode("b", changed.host, changed.cluster_port,
                                           changed.amqp_port, changed.http_port, 10)]


def test_a_moved_node_recorded_down_is_re_addressed_first_then_brought_up() -> None:
    tracker = controller(now=0)
    tracker.heard(address("b", host="new"), 10)
    recorded = [record("a"), record("b", up=False), record("c")]
    assert tracker.decide(MEMBERS, recorded, 10) == [
        AddClusterNode("b", "new", 25672, 5672, 15672, 10)]
    recorded = [record("a"), record("b", up=False, host="new"), record("c")]
    assert tracker.decide(MEMBERS, recorded, 20) == [SetNodeLiveness("b", True, 20)]


def test_ignores_non_members() -> None:
    tracker = controller(now=0)
    tracker.heard(address("x", host="10.6.6.6"), 100)  # removed, but still sending heartbeats
    recorded = [*all_up(), record("x", up=True)]  # and still in the metadata
    for now in (100, 10 * TIMEOUT):
        keep_alive(tracker, now)
        assert tracker.decide(MEMBERS, recorded, now) == []


def test_took_over_forgets_proposals_in_flight() -> None:
    tracker = controller(now=0)
    assert tracker.decide(MEMBERS, all_up(), TIMEOUT) == [
        SetNodeLiveness("b", False, TIMEOUT), SetNodeLiveness("c", False, TIMEOUT)]
    # Lost leadership, got it back: the old proposals may never have been committed.
    tracker.took_over(MEMBERS, TIMEOUT + 10)
    assert tracker.decide(MEMBERS, all_up(), TIMEOUT + 10) == []  # fresh grace
    later = 2 * TIMEOUT + 10
    assert tracker.decide(MEMBERS, all_up(), later) == [
        SetNodeLiveness("b", False, later), SetNodeLiveness("c", False, later)]


def test_decide_accepts_iterables_and_duplicates() -> None:
    tracker = controller(now=0)
    commands = tracker.decide(iter(["c", "b", "a", "b"]), iter(all_up()), TIMEOUT)
    assert commands == [SetNodeLiveness("b", False, TIMEOUT), SetNodeLiveness("c", False, TIMEOUT)]


def test_is_alive_boundary() -> None:
    tracker = LivenessTracker("a", TIMEOUT)
    tracker.heard(address("b"), 1000)
    assert tracker.is_alive("b", 1000 + TIMEOUT - 1)
    assert not tracker.is_alive("b", 1000 + TIMEOUT)
    assert not tracker.is_alive("nobody", 1000)


# ------------------------------------------------------------ known bugs


def test_retaking_leadership_does_not_revert_an_address_recorded_meanwhile() -> None:
    tracker = controller(now=0)
    tracker.heard(address("b", host="old-host"), 100)
    # Leadership moves away; meanwhile b restarts elsewhere and the other controller
    # records its new address. Then this node becomes the controller again.
    tracker.took_over(MEMBERS, 10_000)
    recorded = [record("a"), record("b", host="new-host"), record("c")]
    # b's next heartbeat (with new-host) has not arrived yet.
    assert tracker.decide(MEMBERS, recorded, 10_000) == []


def test_a_member_that_joined_after_take_over_gets_a_grace_period() -> None:
    tracker = controller(now=0)
    members = (*MEMBERS, "d")
    # ClusterMembership._change records d (AddClusterNode, up) and then adds it to the
    # Raft membership; d sends heartbeats only once it learns who the leader is.
    recorded = [*all_up(), record("d")]
    keep_alive(tracker, 5000)
    assert tracker.decide(members, recorded, 5000) == []


# -- a broken link is a faster signal than the session timeout ----------------


def test_a_node_whose_link_stays_broken_for_the_grace_is_down_before_the_timeout() -> None:
    tracker = LivenessTracker("a", session_timeout_ms=3000, link_grace_ms=200)
    tracker.took_over(MEMBERS, 0)
    keep_alive(tracker, 1000)
    tracker.link_lost("b", 1000)
    tracker.link_lost("b", 1100)  # a second report keeps the first loss time
    assert tracker.decide(MEMBERS, all_up(), 1199) == []
    assert tracker.decide(MEMBERS, all_up(), 1200) == [SetNodeLiveness("b", False, 1200)]
    assert tracker.is_alive("c", 1200)


def test_a_link_restored_within_the_grace_changes_nothing() -> None:
    tracker = LivenessTracker("a", session_timeout_ms=3000, link_grace_ms=200)
    tracker.took_over(MEMBERS, 0)
    keep_alive(tracker, 1000)
    tracker.link_lost("b", 1000)
    tracker.link_restored("b")
    assert tracker.decide(MEMBERS, all_up(), 1500) == []
    tracker.link_lost("c", 1600)
    tracker.heard(address("c"), 1650)  # a heartbeat proves the link is back
    assert tracker.decide(MEMBERS, all_up(), 2000) == []


def test_a_new_controller_gives_unconnected_nodes_only_the_link_grace() -> None:
    tracker = LivenessTracker("a", session_timeout_ms=3000, link_grace_ms=200)
    tracker.took_over(MEMBERS, 1000, disconnected=["b", "a"])
    assert tracker.decide(MEMBERS, all_up(), 1199) == []
    assert tracker.decide(MEMBERS, all_up(), 1200) == [SetNodeLiveness("b", False, 1200)]
    assert tracker.is_alive("a", 5000)  # never itself


def test_a_new_controller_counts_the_grace_from_its_own_link_loss() -> None:
    tracker = LivenessTracker("a", session_timeout_ms=3000, link_grace_ms=500)
    tracker.took_over(MEMBERS, 0)
    tracker.heard(address("c"), 1000)
    tracker.link_lost("b", 1000)  # seen as a follower, before this node led
    tracker.took_over(MEMBERS, 1400, disconnected=["b"])
    assert tracker.decide(MEMBERS, all_up(), 1499) == []
    assert tracker.decide(MEMBERS, all_up(), 1500) == [SetNodeLiveness("b", False, 1500)]


def test_a_host_or_zone_heard_is_recorded_and_an_empty_one_changes_nothing() -> None:
    tracker = controller(now=0)
    tracker.heard(NodeAddress("b", "127.0.0.1", 25672, 5672, 15672, "hB", "z1"), 10)
    tracker.heard(address("c"), 10)
    assert tracker.decide(MEMBERS, all_up(), 10) == [
        AddClusterNode("b", "127.0.0.1", 25672, 5672, 15672, 10, "hB", "z1")]
    labelled = [record("a"), ClusterNodeRecord("b", "127.0.0.1", 25672, 5672, 15672, True, 0,
                                               "hB", "z1"), record("c")]
    assert tracker.decide(MEMBERS, labelled, 20) == []
    tracker.heard(address("b"), 30)  # an older node says no host: the record stays
    assert tracker.decide(MEMBERS, labelled, 30) == []
