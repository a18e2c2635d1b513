"""Membership values, the broker's voter rule, the change planner and the config history."""

import pytest

from replication.raft import ChangeKind, ConfigChange, ConfigChangeError, Membership
from replication.raft.membership import ConfigHistory, desired_roles, next_change

ABC = Membership.of(["a", "b", "c"])


def test_apply_adds_promotes_demotes_and_removes() -> None:
    with_d = ABC.apply(ConfigChange(ChangeKind.ADD_LEARNER, "d"))
    assert with_d == Membership.of(["a", "b", "c"], ["d"])
    promoted = with_d.apply(ConfigChange(ChangeKind.ADD_VOTER, "d"))
    assert promoted == Membership.of(["a", "b", "c", "d"])
    assert promoted.quorum == 3
    demoted = promoted.apply(ConfigChange(ChangeKind.ADD_LEARNER, "a"))
    assert demoted == Membership.of(["b", "c", "d"], ["a"])
    assert demoted.apply(ConfigChange(ChangeKind.REMOVE, "a")) == Membership.of(["b", "c", "d"])


@pytest.mark.parametrize(
    ("membership", "change", "reason"),
    [
        (ABC, ConfigChange(ChangeKind.ADD_VOTER, "a"), "already a voter"),
        (Membership.of(["a"], ["l"]), ConfigChange(ChangeKind.ADD_LEARNER, "l"),
         "already a learner"),
        (Membership.of(["a"]), ConfigChange(ChangeKind.REMOVE, "a"), "last voter"),
        (Membership.of(["a"]), ConfigChange(ChangeKind.ADD_LEARNER, "a"), "last voter"),
        (ABC, ConfigChange(ChangeKind.REMOVE, "z"), "not a member"),
    ],
)
def test_pointless_or_fatal_changes_are_refused(
    membership: Membership, change: ConfigChange, reason: str
) -> None:
    with pytest.raises(ConfigChangeError, match=reason):
        membership.apply(change)


def test_a_node_cannot_be_voter_and_learner() -> None:
    with pytest.raises(ConfigChangeError, match="voter and learner"):
        Membership.of(["a", "b"], ["b"])


def test_encoding_is_canonical_and_round_trips() -> None:
    one = Membership.of(["c", "a", "b"], ["e", "d"])
    other = Membership.of(["b", "c", "a"], ["d", "e"])
    assert one.encode() == other.encode()
    assert Membership.decode(one.encode()) == one


def test_desired_roles_makes_up_to_five_voters_and_the_rest_learners() -> None:
    assert desired_roles(["a", "b", "c"]) == ABC
    seven = desired_roles(["a", "b", "c", "d", "e", "f", "g"])
    assert seven == Membership.of(["a", "b", "c", "d", "e"], ["f", "g"])


def test_desired_roles_keeps_current_voters_rather_than_reshuffling() -> None:
    current = Membership.of(["b", "c", "d", "e", "f"], ["a"])
    assert desired_roles(["a", "b", "c", "d", "e", "f"], current) == current
    # A voter left: the first listed learner takes its place.
    after = desired_roles(["a", "b", "c", "d", "f", "g"], current)
    assert after == Membership.of(["a", "b", "c", "d", "f"], ["g"])


def test_next_change_walks_one_server_at_a_time() -> None:
    current = ABC
    target = Membership.of(["a", "b", "d"], ["e"])
    steps = []
    while (step := next_change(current, target)) is not None:
        steps.append(str(step))
        current = current.apply(step)
    assert steps == ["add-learner d", "add-learner e", "remove c", "add-voter d"]
    assert current == target


def test_config_history_answers_by_index_and_follows_truncation_and_compaction() -> None:
    history = ConfigHistory(0, ABC)
    abcd = Membership.of(["a", "b", "c", "d"])
    abd = Membership.of(["a", "b", "d"])
    history.record(5, abcd)
    history.record(9, abd)
    assert [history.at(i) for i in (4, 5, 8, 9, 20)] == [ABC, abcd, abcd, abd, abd]
    assert history.latest == abd and history.latest_index == 9
    history.truncate_from(9)  # entry 9 was overwritten: its change is undone
    assert history.latest == abcd and history.latest_index == 5
    with pytest.raises(ValueError, match="not after"):
        history.record(5, abd)
    history.compact_to(7)
    assert history.at(7) == abcd and history.latest_index == 7
    history.truncate_from(3)  # never below the base
    assert history.latest == abcd
