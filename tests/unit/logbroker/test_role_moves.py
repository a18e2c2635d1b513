"""`RoleMoves`: the next step of each queue's move, from explicit records and holdings."""

from __future__ import annotations

from logbroker.metadata import ElectQueueLeader, QueueRecord
from logbroker.role_moves import (
    Closed,
    CloseShell,
    CopyRead,
    EpochProposed,
    Follow,
    Forget,
    Forgotten,
    HandInSync,
    HandMembers,
    Holding,
    LeaderShell,
    Notice,
    Opened,
    OpenLeader,
    ProposeEpoch,
    ReadCopyEpoch,
    RoleEffect,
    RoleMoves,
    Settled,
    StepFailed,
    StopFollowing,
    Stopped,
)

KEY = ("/", "q")
NOTHING = Holding()
FOLLOWING = Holding(following=True)


def record(leader: str | None = "n1", epoch: int = 3, members: tuple[str, ...] = ("n1", "n2", "n3"),
           in_sync: tuple[str, ...] | None = None) -> QueueRecord:
    return QueueRecord("/", "q", True, None, False, leader_node=leader, members=members,
                       epoch=epoch, in_sync=in_sync if in_sync is not None else members)


def shell(epoch: int = 3, members: tuple[str, ...] = ("n1", "n2", "n3"),
          in_sync: tuple[str, ...] | None = None) -> Holding:
    return Holding(LeaderShell(True, epoch, members,
                               in_sync if in_sync is not None else members))


def steps(effects: list[RoleEffect]) -> list[RoleEffect]:
    """The effects without the notices (what the driver carries out)."""
    return [effect for effect in effects if not isinstance(effect, Notice)]


def counts(effects: list[RoleEffect]) -> list[str]:
    return [e.count for e in effects if isinstance(e, Notice) and e.count is not None]


def test_a_new_leader_reads_its_copy_then_opens_at_the_record_epoch() -> None:
    core = RoleMoves("n1")
    assert steps(core.sync(KEY, record(), NOTHING, True)) == [ReadCopyEpoch(KEY, 3)]
    assert core.moving(KEY)
    assert steps(core.done(KEY, CopyRead(2), record(), NOTHING)) == [OpenLeader(KEY, None)]
    assert steps(core.done(KEY, Opened(), record(), shell())) == [Settled(KEY)]
    assert not core.moving(KEY)


def test_an_unreplicated_queue_opens_without_reading_a_copy() -> None:
    core = RoleMoves("n1")
    local = record(members=())
    assert steps(core.sync(KEY, local, NOTHING, True)) == [OpenLeader(KEY, None)]


def test_a_follower_made_leader_stops_and_opens_from_the_high_watermark_it_knew() -> None:
    core = RoleMoves("n1")
    assert steps(core.sync(KEY, record(), FOLLOWING, True)) == [StopFollowing(KEY)]
    assert steps(core.done(KEY, Stopped(42), record(), NOTHING)) == [ReadCopyEpoch(KEY, 3)]
    assert steps(core.done(KEY, CopyRead(2), record(), NOTHING)) == [OpenLeader(KEY, 42)]


def test_a_shell_of_an_older_epoch_closes_before_the_new_one_opens() -> None:
    core = RoleMoves("n1")
    effects = core.sync(KEY, record(epoch=4), shell(epoch=3), True)
    assert steps(effects) == [CloseShell(KEY, "epoch 4 began")]
    # Never two shells: the open waits for the close.
    assert steps(core.done(KEY, Closed(), record(epoch=4), NOTHING)) == [ReadCopyEpoch(KEY, 4)]
    assert steps(core.done(KEY, CopyRead(3), record(epoch=4), NOTHING)) == [
        OpenLeader(KEY, None)]


def test_a_shell_that_stopped_being_replicated_is_reopened() -> None:
    core = RoleMoves("n1")
    local = record(members=())
    assert steps(core.sync(KEY, local, shell(), True)) == [CloseShell(KEY, "epoch 3 began")]


def test_a_copy_that_led_the_epoch_before_leads_again_from_a_new_epoch() -> None:
    core = RoleMoves("n2")
    led = record(leader="n2", in_sync=("n2", "n1"))
    core.sync(KEY, led, NOTHING, True)
    effects = core.done(KEY, CopyRead(3), led, NOTHING)
    assert steps(effects) == [ProposeEpoch(KEY, ElectQueueLeader(
        "/", "q", 3, "n2", ("n2", "n1"), out_of_sync=False))]
    assert counts(effects) == ["new_epochs_on_reopen"]
    assert steps(core.done(KEY, EpochProposed(None), led, NOTHING)) == [Settled(KEY)]


def test_an_unreadable_copy_counts_as_having_led_the_epoch() -> None:
    core = RoleMoves("n3")
    led = record(leader="n3", in_sync=("n1", "n2"))
    core.sync(KEY, led, NOTHING, True)
    effects = steps(core.done(KEY, CopyRead(None), led, NOTHING))
    assert effects == [ProposeEpoch(KEY, ElectQueueLeader(
        "/", "q", 3, "n3", ("n3", "n1", "n2"), out_of_sync=True))]


def test_a_refused_new_epoch_waits_for_the_metadata() -> None:
    core = RoleMoves("n1")
    core.sync(KEY, record(), NOTHING, True)
    core.done(KEY, CopyRead(3), record(), NOTHING)
    effects = core.done(KEY, EpochProposed("no leader"), record(), NOTHING)
    assert steps(effects) == [Settled(KEY)] and counts(effects) == ["moves_deferred"]
    assert core.catch_up(False) == []
    assert core.catch_up(True) == [KEY]
    assert core.deferred == set()


def test_a_copy_newer_than_the_record_waits_for_newer_metadata() -> None:
    core = RoleMoves("n1")
    core.sync(KEY, record(), NOTHING, True)
    core.done(KEY, CopyRead(2), record(), NOTHING)
    effects = core.done(KEY, Opened("this copy holds epoch 4"), record(), NOTHING)
    assert counts(effects) == ["stale_epoch_opens", "moves_deferred"]
    assert steps(effects) == [Settled(KEY)]
    assert KEY in core.deferred


def test_moves_wait_while_the_metadata_is_not_current() -> None:
    core = RoleMoves("n1")
    effects = core.sync(KEY, record(), NOTHING, False)
    assert steps(effects) == [] and counts(effects) == ["moves_deferred"]
    assert counts(core.sync(KEY, record(), NOTHING, False)) == []  # counted once
    assert core.catch_up(True) == [KEY]


def test_a_sync_during_a_move_is_decided_once_the_step_is_done() -> None:
    core = RoleMoves("n1")
    core.sync(KEY, record(), FOLLOWING, True)
    assert core.sync(KEY, record(epoch=4), FOLLOWING, True) == []  # one move at a time
    core.done(KEY, Stopped(7), record(epoch=4), NOTHING)
    core.done(KEY, CopyRead(3), record(epoch=4), NOTHING)
    # The open ends the move, but a sync came meanwhile: decided again, nothing to do.
    assert steps(core.done(KEY, Opened(), record(epoch=4), shell(epoch=4))) == [Settled(KEY)]


def test_the_last_record_wins_when_a_sync_came_during_the_last_step() -> None:
    core = RoleMoves("n1")
    core.sync(KEY, record(), NOTHING, True)
    core.done(KEY, CopyRead(2), record(), NOTHING)
    core.sync(KEY, record(leader="n2", epoch=4), shell(), True)
    after = record(leader="n2", epoch=4)
    assert steps(core.done(KEY, Opened(), after, shell())) == [
        CloseShell(KEY, "node n1 no longer leads the queue (epoch 4)")]
    assert steps(core.done(KEY, Closed(), after, NOTHING)) == [Follow(KEY), Settled(KEY)]


def test_a_leader_that_lost_the_queue_closes_and_follows() -> None:
    core = RoleMoves("n1")
    moved = record(leader="n2", epoch=4)
    assert steps(core.sync(KEY, moved, shell(), True)) == [
        CloseShell(KEY, "node n1 no longer leads the queue (epoch 4)")]
    assert steps(core.done(KEY, Closed(), moved, NOTHING)) == [Follow(KEY), Settled(KEY)]


def test_a_member_follows_at_once() -> None:
    core = RoleMoves("n2")
    assert core.sync(KEY, record(), NOTHING, True) == [Follow(KEY)]
    assert not core.moving(KEY)


def test_a_copy_no_longer_wanted_is_forgotten() -> None:
    core = RoleMoves("n3")
    gone = record(members=("n1", "n2"))
    assert core.sync(KEY, gone, FOLLOWING, True) == [Forget(KEY)]
    assert core.done(KEY, Forgotten(), gone, NOTHING) == [Settled(KEY)]
    assert core.sync(KEY, None, NOTHING, True) == []


def test_a_deleted_queue_closes_its_shell() -> None:
    core = RoleMoves("n1")
    assert steps(core.sync(KEY, None, shell(), True)) == [
        CloseShell(KEY, "node n1 no longer leads the queue (epoch none)")]


def test_a_changed_replica_set_goes_to_the_open_gate() -> None:
    core = RoleMoves("n1")
    grown = record(members=("n1", "n2", "n3", "n4"), in_sync=("n1", "n2", "n3"))
    assert core.sync(KEY, grown, shell(), True) == [
        HandMembers(KEY, ("n1", "n2", "n3", "n4"), ("n1", "n2", "n3"))]


def test_an_in_sync_set_ignored_while_not_current_is_handed_over() -> None:
    core = RoleMoves("n1")
    shrunk = record(in_sync=("n1", "n2"))
    assert core.sync(KEY, shrunk, shell(), True) == [HandInSync(KEY, ("n1", "n2"))]
    assert core.sync(KEY, record(), shell(), True) == []  # as recorded: nothing


def test_a_failed_step_ends_the_move_and_says_so() -> None:
    core = RoleMoves("n1")
    core.sync(KEY, record(epoch=4), shell(), True)
    effects = core.done(KEY, StepFailed("disk gone"), record(epoch=4), shell())
    assert steps(effects) == [Settled(KEY)]
    assert any("disk gone" in e.text for e in effects if isinstance(e, Notice))
    assert not core.moving(KEY) and KEY not in core.deferred


def test_an_outcome_for_no_move_is_ignored() -> None:
    assert RoleMoves("n1").done(KEY, Closed(), record(), NOTHING) == []
