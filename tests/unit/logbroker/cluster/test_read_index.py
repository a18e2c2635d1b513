"""Whether a node's applied metadata is current: Raft's read index, as a pure object."""

from logbroker.cluster.read_index import AskReadIndex, RaftPosition, ReadIndex


def follower(applied: int, leader: str | None = "a", commit: int = 0) -> RaftPosition:
    return RaftPosition(leader, False, False, commit, applied)


def test_a_leader_is_current_once_its_term_is_committed_and_applied() -> None:
    read_index = ReadIndex()
    assert not read_index.current(RaftPosition("me", True, False, 10, 10))
    assert not read_index.current(RaftPosition("me", True, True, 10, 9))
    assert read_index.current(RaftPosition("me", True, True, 10, 10))
    assert read_index.want(RaftPosition("me", True, True, 10, 10)) is None


def test_a_follower_asks_the_leader_once_and_is_current_at_its_commit_index() -> None:
    read_index = ReadIndex()
    assert not read_index.current(follower(applied=5, commit=5))  # its own index proves nothing
    question = read_index.want(follower(5))
    assert question == AskReadIndex(1, "a")
    assert read_index.want(follower(5)) is None  # one question in flight
    assert read_index.answered(question.request, "a", 12)
    assert not read_index.current(follower(11))
    assert read_index.current(follower(12))


def test_without_a_leader_nothing_is_current_and_nothing_is_asked() -> None:
    read_index = ReadIndex()
    assert read_index.want(follower(5, leader=None)) is None
    assert not read_index.current(follower(5, leader=None))


def test_an_answer_from_a_leader_that_lost_its_place_does_not_count() -> None:
    read_index = ReadIndex()
    question = read_index.want(follower(5))
    assert question is not None
    assert not read_index.answered(question.request, "b", 12)
    assert read_index.confirmed is None
    assert read_index.want(follower(5, leader="b")) == AskReadIndex(2, "b")


def test_a_new_term_forgets_the_answer_and_ignores_the_question_in_flight() -> None:
    read_index = ReadIndex()
    first = read_index.want(follower(5))
    assert first is not None
    read_index.leader_changed()
    second = read_index.want(follower(5, leader="b"))
    assert second is not None and second.leader == "b"
    assert not read_index.answered(first.request, "b", 30)
    assert read_index.answered(second.request, "b", 7)
    read_index.leader_changed()
    assert not read_index.current(follower(7, leader="b"))


def test_no_answer_lets_the_question_be_asked_again() -> None:
    read_index = ReadIndex()
    question = read_index.want(follower(5))
    assert question is not None
    assert not read_index.answered(question.request, "a", None)
    assert read_index.want(follower(5)) is not None
