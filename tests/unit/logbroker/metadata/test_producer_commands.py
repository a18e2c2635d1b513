"""Transactional producers in the metadata: the committed window, pending batches, bounds."""

from __future__ import annotations

import pytest

from logbroker.metadata import (
    AddVhost,
    CommitProducerBatch,
    DeleteVhost,
    MetadataError,
    MetadataState,
    ProducerBatchApplied,
    ProducerRecord,
    decode_command,
    encode_command,
)
from logbroker.metadata.producer_commands import COMMITTED_WINDOW


def state() -> MetadataState:
    return MetadataState.bootstrap("hash")


def test_commit_records_pending_until_applied() -> None:
    meta = state()
    applied = meta.apply(CommitProducerBatch("/", "sink", 3, 1000))
    assert applied.changed
    record = meta.producer("/", "sink")
    assert record == ProducerRecord("/", "sink", 3, (3,), ((3, 1000),), 1000)
    assert record.pending_commit_ms(3) == 1000
    meta.apply(ProducerBatchApplied("/", "sink", 3))
    record = meta.producer("/", "sink")
    assert record is not None and record.pending == () and record.committed == (3,)


def test_a_commit_again_changes_nothing_and_one_behind_is_refused() -> None:
    meta = state()
    meta.apply(CommitProducerBatch("/", "sink", 1, 10))
    meta.apply(CommitProducerBatch("/", "sink", 4, 20))
    assert not meta.apply(CommitProducerBatch("/", "sink", 1, 30)).changed
    with pytest.raises(MetadataError) as refused:
        meta.apply(CommitProducerBatch("/", "sink", 2, 30))
    assert refused.value.reply_code == 406 and "behind" in refused.value.reply_text
    assert not meta.apply(ProducerBatchApplied("/", "sink", 9)).changed


def test_the_committed_window_is_bounded() -> None:
    meta = state()
    for seq in range(COMMITTED_WINDOW + 10):
        meta.apply(CommitProducerBatch("/", "sink", seq, seq))
        meta.apply(ProducerBatchApplied("/", "sink", seq))
    record = meta.producer("/", "sink")
    assert record is not None
    assert record.committed == tuple(range(10, COMMITTED_WINDOW + 10))
    assert record.last_committed_seq == COMMITTED_WINDOW + 9


def test_the_least_recent_idle_producer_is_forgotten_at_the_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("logbroker.metadata.producer_commands.MAX_PRODUCERS", 3)
    meta = state()
    meta.apply(CommitProducerBatch("/", "busy", 0, 1))  # pending: never forgotten
    meta.apply(CommitProducerBatch("/", "old", 0, 2))
    meta.apply(ProducerBatchApplied("/", "old", 0))
    meta.apply(CommitProducerBatch("/", "new", 0, 3))
    meta.apply(ProducerBatchApplied("/", "new", 0))
    meta.apply(CommitProducerBatch("/", "newest", 0, 4))
    assert meta.producer("/", "old") is None
    assert all(meta.producer("/", name) for name in ("busy", "new", "newest"))


def test_refusals_and_cascades() -> None:
    meta = state()
    with pytest.raises(MetadataError):
        meta.apply(CommitProducerBatch("nope", "sink", 0, 0))
    with pytest.raises(MetadataError):
        meta.apply(CommitProducerBatch("/", "", 0, 0))
    with pytest.raises(MetadataError):
        meta.apply(CommitProducerBatch("/", "sink", -1, 0))
    meta.apply(AddVhost("v"))
    meta.apply(CommitProducerBatch("v", "sink", 0, 0))
    meta.apply(DeleteVhost("v"))
    meta.apply(AddVhost("v"))
    assert meta.producer("v", "sink") is None


def test_snapshot_and_command_codec_round_trip() -> None:
    meta = state()
    meta.apply(CommitProducerBatch("/", "sink", 7, 70))
    restored = MetadataState.from_snapshot(meta.snapshot())
    assert restored.producer("/", "sink") == meta.producer("/", "sink")
    older = meta.snapshot()
    for vhost in older["vhosts"]:
        del vhost["producers"]  # a snapshot written before producer batches
    assert MetadataState.from_snapshot(older).producer("/", "sink") is None
    for command in (CommitProducerBatch("/", "s", 1, 2), ProducerBatchApplied("/", "s", 1)):
        assert decode_command(encode_command(command)) == command
