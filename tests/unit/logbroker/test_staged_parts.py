"""StagedParts: parts held per batch, taken in the order listed, bounded, expired."""

from __future__ import annotations

import pytest

from logbroker.message import Message
from logbroker.staged_parts import (
    BatchKey,
    StagedParts,
    StagingLimit,
    StagingLimits,
    UnknownParts,
)

KEY = BatchKey("/", "sink", 1)


def messages(*bodies: bytes) -> list[Message]:
    return [Message("", "q", body) for body in bodies]


def test_take_returns_listed_parts_in_order_and_forgets_the_batch() -> None:
    staged = StagedParts()
    staged.stage(KEY, "a", messages(b"1", b"22"), now_ms=0)
    staged.stage(KEY, "b", messages(b"333"), now_ms=0)
    staged.stage(KEY, "c", messages(b"4444"), now_ms=0)  # a failed attempt's part
    assert staged.bytes_held == 10
    parts = staged.take(KEY, ["b", "a"])
    assert [m.body for p in parts for m in p.messages] == [b"333", b"1", b"22"]
    assert staged.bytes_held == 0
    assert staged.open_batches("/", "sink") == []


def test_an_unknown_token_changes_nothing() -> None:
    staged = StagedParts()
    staged.stage(KEY, "a", messages(b"1"), now_ms=0)
    with pytest.raises(UnknownParts) as unknown:
        staged.take(KEY, ["a", "zz"])
    assert unknown.value.tokens == ("zz",)
    assert staged.take(KEY, ["a"])[0].token == "a"
    with pytest.raises(UnknownParts):
        staged.take(BatchKey("/", "sink", 2), ["a"])


def test_limits_refuse_without_staging() -> None:
    staged = StagedParts(StagingLimits(max_bytes=10, max_batch_bytes=6, max_batches=2))
    staged.stage(KEY, "a", messages(b"12345"), now_ms=0)
    with pytest.raises(StagingLimit) as too_large:
        staged.stage(KEY, "b", messages(b"12"), now_ms=0)
    assert too_large.value.too_large
    staged.stage(BatchKey("/", "sink", 2), "c", messages(b"12345"), now_ms=0)
    with pytest.raises(StagingLimit) as full:
        staged.stage(BatchKey("/", "sink", 3), "d", messages(b"1"), now_ms=0)
    assert not full.value.too_large
    assert staged.bytes_held == 10


def test_batches_untouched_for_the_timeout_expire() -> None:
    staged = StagedParts(StagingLimits(timeout_ms=100))
    staged.stage(KEY, "a", messages(b"1"), now_ms=0)
    other = BatchKey("/", "sink", 2)
    staged.stage(other, "b", messages(b"1"), now_ms=50)
    [view] = [b for b in staged.open_batches("/", "sink") if b.seq == 1]
    assert (view.parts, view.messages, view.size_bytes, view.expires_at_ms) == (1, 1, 1, 100)
    assert staged.expire(now_ms=99) == []
    assert staged.expire(now_ms=100) == [KEY]
    staged.stage(other, "c", messages(b"1"), now_ms=120)  # touched again
    assert staged.expire(now_ms=200) == []
    assert staged.discard(other) == 2 and staged.bytes_held == 0
