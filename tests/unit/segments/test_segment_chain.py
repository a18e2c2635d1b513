"""The segment chain: contiguous segments, the open sealed ones bounded, the unconfirmed
ones kept open until their sync, and shortening from both ends."""

from __future__ import annotations

import pytest

from segments.memory_filesystem import MemoryFileSystem
from segments.record_batch import Record, encode_batch_parts
from segments.segment import Segment
from segments.segment_chain import SegmentChain, delete_detached

DIR = "/q"
INTERVAL = 4096


def _chain(fs: MemoryFileSystem, open_sealed_max: int = 8) -> SegmentChain:
    fs.makedirs(DIR)
    return SegmentChain(fs, DIR, INTERVAL, open_sealed_max,
                        [Segment.create(fs, DIR, 0, INTERVAL)])


def _fill_and_roll(chain: SegmentChain, records: int) -> Segment:
    """Append `records` records to the active segment, seal it and start the next."""
    active = chain.active
    batch = [Record(f"v{active.next_offset + i}".encode(), i) for i in range(records)]
    active.append_encoded([encode_batch_parts(active.next_offset, batch)])
    active.seal()
    chain.rolled(active)
    chain.start_segment(active.next_offset)
    return active


def _bases(chain: SegmentChain) -> list[int]:
    return [segment.base_offset for segment in chain.all()]


def test_segments_stay_contiguous_and_lookups_find_their_slot() -> None:
    chain = _chain(MemoryFileSystem())
    for _ in range(3):
        _fill_and_roll(chain, 10)
    assert _bases(chain) == [0, 10, 20, 30]
    assert [chain.slot_of(offset) for offset in (0, 9, 10, 29, 30, 99)] == [0, 0, 1, 2, 3, 3]
    assert chain.first.base_offset == 0 and chain.active.base_offset == 30
    assert chain.unconfirmed() == chain.all()[:-1]


def test_a_chain_is_never_empty() -> None:
    with pytest.raises(ValueError):
        SegmentChain(MemoryFileSystem(), DIR, INTERVAL, 8, [])


def test_open_sealed_segments_are_bounded_but_unconfirmed_ones_are_never_closed() -> None:
    chain = _chain(MemoryFileSystem(), open_sealed_max=2)
    sealed = [_fill_and_roll(chain, 5) for _ in range(4)]
    for slot in range(4):
        chain.use(slot)  # unconfirmed: kept open past the bound
    assert all(segment._handle is not None for segment in sealed)
    chain.confirmed(sealed)
    assert chain.unconfirmed() == []
    assert sum(segment._handle is not None for segment in sealed) == 2  # the newest two
    assert sealed[-1]._handle is not None and sealed[0]._handle is None


def test_detach_front_keeps_the_active_segment_and_forgets_what_it_detached() -> None:
    fs = MemoryFileSystem()
    chain = _chain(fs)
    for _ in range(3):
        _fill_and_roll(chain, 10)
    detached = chain.detach_front(25)  # [20, 30) still holds offsets 25..29
    assert [segment.base_offset for segment in detached] == [0, 10]
    assert _bases(chain) == [20, 30] and chain.slot_of(25) == 0
    assert all(segment not in chain.unconfirmed() for segment in detached)
    assert chain.detach_front(1000) != [] and _bases(chain) == [30]  # never the active one
    assert fs.exists(detached[0].log_path)  # the files wait for delete_detached
    delete_detached(fs, DIR, detached)
    assert not fs.exists(detached[0].log_path)


def test_cut_back_reactivates_the_segment_holding_the_offset_and_keeps_its_head() -> None:
    fs = MemoryFileSystem()
    chain = _chain(fs)
    for _ in range(3):
        _fill_and_roll(chain, 10)
    chain.cut_back_to(15)  # inside the batch of [10, 20)
    assert _bases(chain) == [0, 10]
    assert chain.active.next_offset == 15
    assert chain.unconfirmed() == [chain.first]  # the reactivated one waits for no sync
    assert [r.value for b in chain.active.read_batches(10, 1 << 20) for r in b.records()] == [
        f"v{offset}".encode() for offset in range(10, 15)]


def test_restart_at_leaves_one_empty_segment_at_the_offset() -> None:
    fs = MemoryFileSystem()
    chain = _chain(fs)
    old = [_fill_and_roll(chain, 10) for _ in range(2)]
    chain.restart_at(500)
    assert _bases(chain) == [500] and chain.active.size == 0
    assert chain.unconfirmed() == []
    assert not any(fs.exists(segment.log_path) for segment in old)
