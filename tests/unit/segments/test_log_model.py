"""Random operation sequences against a plain list model, on the in-memory file system.

The model is the list of records in offset order plus `log_start_offset`.
`durable_next` tracks how far the log is known to be fsynced: a crash may keep
any prefix of the unsynced tail, never less than `durable_next`, and never a
record that differs from the model.
"""

import random

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from segments.log import Log, LogConfig
from segments.memory_filesystem import MemoryFileSystem
from segments.record_batch import Compression, Record

DIRECTORY = "/data/queue"


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.fs = MemoryFileSystem()
        self.config = LogConfig(segment_bytes_max=1024, index_interval_bytes=128)
        self.log = Log.open(self.fs, DIRECTORY, self.config)
        self.model: list[Record] = []
        self.start = 0
        self.durable_next = 0
        self.counter = 0

    @property
    def next_offset(self) -> int:
        return self.start + len(self.model)

    def _make(self, count: int, value_size: int, timestamps: list[int]) -> list[Record]:
        made = []
        for i in range(count):
            self.counter += 1
            value = f"r{self.counter}-".encode() + bytes([self.counter % 251]) * value_size
            key = None if i % 2 else f"k{self.counter}".encode()
            headers = (("h", value[:3]),) if i % 3 == 0 else ()
            made.append(Record(value, timestamps[i % len(timestamps)], key, headers))
        return made

    @rule(
        groups=st.lists(
            st.tuples(st.integers(1, 6), st.integers(0, 200)), min_size=1, max_size=4
        ),
        timestamps=st.lists(st.integers(0, 10_000), min_size=1, max_size=6),
    )
    def append(self, groups: list[tuple[int, int]], timestamps: list[int]) -> None:
        batches = [self._make(count, size, timestamps) for count, size in groups]
        results = self.log.append_group(batches)
        for batch, result in zip(batches, results, strict=True):
            assert result.base_offset == self.next_offset
            self.model.extend(batch)
            assert result.next_offset == self.next_offset

    @rule()
    def sync(self) -> None:
        self.log.sync()
        self.durable_next = self.next_offset

    @rule()
    def roll(self) -> None:
        self.log.roll()  # rolling makes nothing durable by itself

    @rule(data=st.data(), max_bytes=st.integers(1, 3000))
    def read(self, data: st.DataObject, max_bytes: int) -> None:
        offset = data.draw(st.integers(self.start, self.next_offset))
        got = self.log.read(offset, max_bytes)
        if offset < self.next_offset:
            assert got, "a read below next_offset returns at least one record"
        for expected_offset, record in enumerate(got, start=offset):
            assert record.offset == expected_offset
            expected = self.model[expected_offset - self.start]
            assert (record.value, record.key, record.timestamp_ms, record.headers) == (
                expected.value, expected.key, expected.timestamp_ms, expected.headers)

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.start, self.next_offset))
        self.log.truncate_to(offset)
        del self.model[offset - self.start :]
        self.durable_next = self.next_offset

    @rule(data=st.data())
    def delete_before(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.start, self.next_offset))
        self.log.delete_before(offset)
        new_start = self.log.log_start_offset
        assert self.start <= new_start <= offset or new_start == self.start
        del self.model[: new_start - self.start]
        self.start = new_start
        self.durable_next = max(self.durable_next, self.start)

    @rule(timestamp=st.integers(-1, 10_001))
    def offset_for_timestamp(self, timestamp: int) -> None:
        expected = next(
            (self.start + i for i, r in enumerate(self.model) if r.timestamp_ms >= timestamp),
            self.next_offset,
        )
        assert self.log.offset_for_timestamp(timestamp) == expected

    @rule()
    def close_and_reopen(self) -> None:
        self.log.close()
        self.log = Log.open(self.fs, DIRECTORY, self.config)
        assert self.log.recovery.truncated_bytes == 0
        self.durable_next = self.next_offset

    @rule(seed=st.integers(0, 2**32 - 1))
    def crash_and_reopen(self, seed: int) -> None:
        self.fs.crash(random.Random(seed))
        self.log = Log.open(self.fs, DIRECTORY, self.config)
        recovered_next = self.log.next_offset
        assert self.log.log_start_offset == self.start
        assert self.durable_next <= recovered_next <= self.next_offset, (
            f"recovered to {recovered_next}, synced up to {self.durable_next}"
        )
        del self.model[recovered_next - self.start :]
        self.durable_next = recovered_next

    @precondition(lambda self: self.model)
    @rule()
    def full_scan(self) -> None:
        offsets = []
        offset = self.start
        while offset < self.next_offset:
            got = self.log.read(offset, 4096)
            offsets.extend(r.offset for r in got)
            offset = got[-1].offset + 1
        assert offsets == list(range(self.start, self.next_offset))

    @invariant()
    def bounds_match(self) -> None:
        assert self.log.log_start_offset == self.start
        assert self.log.next_offset == self.next_offset

    def teardown(self) -> None:
        self.log.close()


class CompressedLogModel(LogModel):
    def __init__(self) -> None:
        super().__init__()
        self.log.close()
        self.config = LogConfig(
            segment_bytes_max=1024, index_interval_bytes=128, compression=Compression.ZSTD
        )
        self.log = Log.open(self.fs, DIRECTORY, self.config)


TestLogModel = LogModel.TestCase
TestLogModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestCompressedLogModel = CompressedLogModel.TestCase
TestCompressedLogModel.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
