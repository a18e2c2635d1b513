"""HeldAcks: an isolated leader's acks are kept until it rejoins; a fenced one's dropped."""

from logbroker.queue.held_acks import HeldAcks


def test_acks_held_while_isolated_are_taken_once() -> None:
    held = HeldAcks()
    held.hold([3, 4], fenced=False)
    held.hold([7], fenced=False)
    assert held.take() == [3, 4, 7]
    assert held.take() == [] and len(held) == 0


def test_a_fenced_leader_holds_nothing_and_the_limit_bounds_the_rest() -> None:
    held = HeldAcks(limit=2)
    held.hold([1], fenced=True)
    assert len(held) == 0
    held.hold([1, 2], fenced=False)
    held.hold([3], fenced=False)  # two held already: dropped, redelivered later
    assert held.take() == [1, 2]
