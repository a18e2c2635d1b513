"""DeliveryTags: RabbitMQ's collect_acks rules for ack / nack / reject with `multiple`."""

from __future__ import annotations

import pytest

from api.amqp.delivery_tags import DeliveryTags, Unacked, UnknownDeliveryTag


def tags_with(*consumer_tags: str | None) -> DeliveryTags[str]:
    """Tags 1..n, one unacked delivery each, from queue "q" at offsets 0..n-1."""
    tags: DeliveryTags[str] = DeliveryTags()
    for offset, consumer_tag in enumerate(consumer_tags):
        tags.issue(Unacked("q", offset, consumer_tag))
    return tags


def test_tags_count_from_one_and_no_ack_deliveries_take_a_tag_but_are_not_kept() -> None:
    tags: DeliveryTags[str] = DeliveryTags()
    assert tags.issue(Unacked("q", 0, "c")) == 1
    assert tags.issue(None) == 2
    assert tags.issue(Unacked("q", 1, None)) == 3
    assert len(tags) == 2 and tags.consumer_unacked == 1
    with pytest.raises(UnknownDeliveryTag, match="unknown delivery tag 2"):
        tags.take(2, multiple=False)


def test_single_and_multiple_take() -> None:
    tags = tags_with("c", "c", "c", "c")
    assert [tag for tag, _ in tags.take(2, multiple=False)] == [2]
    assert [(tag, e.offset) for tag, e in tags.take(3, multiple=True)] == [(1, 0), (3, 2)]
    assert [tag for tag, _ in tags.take(0, multiple=True)] == [4]
    assert len(tags) == 0 and tags.consumer_unacked == 0


def test_multiple_needs_the_named_tag_and_a_failed_take_changes_nothing() -> None:
    tags = tags_with("c", "c")
    tags.take(2, multiple=False)
    with pytest.raises(UnknownDeliveryTag):
        tags.take(2, multiple=True)
    with pytest.raises(UnknownDeliveryTag, match="unknown delivery tag 0"):
        tags.take(0, multiple=False)
    assert len(tags) == 1


def test_restore_puts_tags_back_in_order() -> None:
    tags = tags_with("c", None, "c")
    taken = tags.take(2, multiple=True)
    assert tags.consumer_unacked == 1
    tags.restore(taken)
    assert tags.consumer_unacked == 2
    assert [tag for tag, _ in tags.take_all()] == [1, 2, 3]

