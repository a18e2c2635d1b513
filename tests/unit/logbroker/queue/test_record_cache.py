"""RecordCache: read-ahead on a miss, remembered writes, settled records leave."""

from logbroker.queue.record_cache import CACHE_BYTES_MAX, RecordCache
from segments.log import Log
from segments.memory_filesystem import MemoryFileSystem
from segments.record_batch import LogRecord, Record


class CountingLog:
    """A Log whose reads are counted."""

    def __init__(self) -> None:
        self.log = Log.open(MemoryFileSystem(), "/q")
        self.reads = 0

    def read(self, offset: int, max_bytes: int) -> list[LogRecord]:
        self.reads += 1
        return self.log.read(offset, max_bytes)


def _records(first: int, count: int, size: int = 10) -> list[Record]:
    return [Record(bytes([i % 256]) * size, first + i) for i in range(count)]


def _cache() -> tuple[CountingLog, RecordCache]:
    counting = CountingLog()
    return counting, RecordCache(counting)  # type: ignore[arg-type]


def test_a_miss_reads_ahead_and_later_records_come_from_memory() -> None:
    counting, cache = _cache()
    counting.log.append(_records(0, 50))
    assert cache.record_at(0).value == b"\x00" * 10
    assert [cache.record_at(i).value[0] for i in range(1, 50)] == list(range(1, 50))
    assert counting.reads == 1


def test_written_records_are_delivered_without_reading_the_log() -> None:
    counting, cache = _cache()
    for first in range(0, 30, 3):
        written = _records(first, 3)
        counting.log.append(written)
        cache.wrote(first, written)
        for offset in range(first, first + 3):
            assert cache.record_at(offset) is written[offset - first]
        cache.settled_below(first + 3)
    assert counting.reads == 0


def test_a_write_that_does_not_continue_the_cache_is_not_kept() -> None:
    counting, cache = _cache()
    counting.log.append(_records(0, 10))
    cache.record_at(0)  # caches [0, 10)
    counting.log.append(_records(10, 5))
    later = _records(15, 5)
    counting.log.append(later)
    cache.wrote(15, later)  # a gap: [10, 15) is not cached
    assert cache.record_at(15).value == later[0].value
    assert counting.reads == 2  # 15 was read back, not taken from the dropped write


def test_remembered_writes_are_bounded() -> None:
    counting, cache = _cache()
    size = 64 * 1024
    offset = 0
    while offset * size <= CACHE_BYTES_MAX + size:
        written = _records(offset, 1, size)
        counting.log.append(written)
        cache.wrote(offset, written)
        offset += 1
    kept = CACHE_BYTES_MAX // size
    for index in range(kept):
        cache.record_at(index)
    assert counting.reads == 0
    cache.record_at(kept)  # past the bound: read from the log
    assert counting.reads == 1


def test_settled_records_leave_the_cache() -> None:
    counting, cache = _cache()
    written = _records(0, 10)
    counting.log.append(written)
    cache.wrote(0, written)
    cache.settled_below(4)
    assert cache.record_at(5) is written[5]
    assert counting.reads == 0
    cache.record_at(2)  # settled and dropped: a redelivery reads the log
    assert counting.reads == 1
    cache.settled_below(100)
    more = _records(10, 2)
    counting.log.append(more)
    cache.wrote(10, more)  # an emptied cache starts again at the next write
    assert cache.record_at(11) is more[1]
    assert counting.reads == 1
