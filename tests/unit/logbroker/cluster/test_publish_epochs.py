"""publish_epochs.refusal: a forwarded publish is appended only by the leader of the
epoch its sender meant (or of a later one), as this node's metadata and shell agree."""

from logbroker.cluster.publish_epochs import refusal
from logbroker.metadata.records import QueueRecord


def _record(leader: str, epoch: int) -> QueueRecord:
    return QueueRecord("/", "q", True, None, False, leader_node=leader,
                       members=("a", "b", "c"), epoch=epoch)


def test_the_leader_of_the_epoch_meant_appends() -> None:
    assert refusal(4, 4, _record("a", 4), "a") is None


def test_a_sender_on_older_code_or_an_unreplicated_queue_is_not_checked() -> None:
    assert refusal(None, 4, _record("b", 5), "a") is None
    assert refusal(None, None, None, "a") is None


def test_a_leader_elected_again_since_appends() -> None:
    assert refusal(4, 6, _record("a", 6), "a") is None  # the sender's metadata is behind


def test_a_deposed_leader_refuses() -> None:
    # Its shell still serves epoch 4; the sender already knows epoch 5.
    why = refusal(5, 4, _record("a", 4), "a")
    assert why is not None and "epoch 4" in why and "epoch 5" in why
    # Its metadata (caught up to the sender's) names another leader; the shell has
    # not closed yet.
    why = refusal(4, 4, _record("b", 5), "a")
    assert why is not None and "names b leader of epoch 5" in why
    # Its metadata names it leader of a new epoch the shell does not serve yet.
    assert refusal(4, 4, _record("a", 5), "a") is not None


def test_a_queue_gone_or_not_replicated_here_refuses() -> None:
    assert refusal(4, 4, None, "a") is not None
    assert refusal(4, None, _record("a", 4), "a") is not None
