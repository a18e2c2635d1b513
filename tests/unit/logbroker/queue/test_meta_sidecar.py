"""Meta sidecars: a restart's per-message facts without reading every message (issue 28)."""

import asyncio
import os
from array import array
from collections.abc import Callable

from hypothesis import given
from hypothesis import settings as settings_
from hypothesis import strategies as st
from pamqp import commands

from logbroker.message import Message, records_of
from logbroker.queue.consumers import Consumer
from logbroker.queue.effects import Deliver
from logbroker.queue.message_meta import (
    NO_EXPIRY,
    MessageMeta,
    MessageMetaTable,
    MetaColumns,
    MetaRun,
    meta_of,
)
from logbroker.queue.meta_sidecar import (
    decode_sidecar,
    encode_sidecar,
    read_sidecar,
    sidecar_directory,
    sidecar_path,
    write_sidecar,
)
from logbroker.queue.queue_core import QueueCore
from logbroker.queue.queue_limits import QueueLimits
from logbroker.queue.queue_opening import open_queue_files
from logbroker.queue.queue_recovery import recovered_metas
from logbroker.queue.queue_settings import QueueSettings
from logbroker.queue.queue_shell import QueueShell
from logbroker.queue.ready_set import PriorityReadySet
from logbroker.queue.segment_facts import SegmentFacts, scanned_facts
from logbroker.queue.sidecar_writer import SidecarWriter
from segments.cursor_log import CursorLog
from segments.log import Log, LogConfig
from segments.memory_filesystem import MemoryFileSystem

DIRECTORY = "/data/q"
SMALL = LogConfig(segment_bytes_max=1024)
NOW = 1_000_000


def settings(ttl: int | None = None, max_priority: int | None = None,
             durable: bool = True) -> QueueSettings:
    return QueueSettings("/", "q", durable, QueueLimits(), message_ttl_ms=ttl,
                         max_priority=max_priority)


def message(index: int) -> Message:
    """Messages that differ in every fact a restart needs."""
    properties = commands.Basic.Properties(
        delivery_mode=1 if index % 7 == 3 else 2,
        priority=index % 5 if index % 3 else None,
        expiration=str(index * 100) if index % 4 == 1 else ("bad" if index == 10 else None),
    )
    return Message("", "q", b"x" * (index % 50 + 1), properties,
                   timestamp_ms=NOW + index * 10)


def written_log(fs: MemoryFileSystem, count: int = 120) -> Log:
    log = Log.open(fs, os.path.join(DIRECTORY, "log"), SMALL)
    for first in range(0, count, 6):  # several records a batch, several batches a segment
        log.append(records_of([message(i) for i in range(first, min(first + 6, count))]))
    log.sync()
    return log


def reference_metas(log: Log, ack_floor: int, queue: QueueSettings
                    ) -> tuple[list[MessageMeta], list[int]]:
    """What a restart computed before sidecars: every message decoded."""
    metas, transient = [], []
    offset = ack_floor
    while offset < log.next_offset:
        for record in log.read(offset):
            stored = Message.from_record(record)
            metas.append(meta_of(stored, queue.message_ttl_ms, record.timestamp_ms))
            if not stored.persistent or not queue.durable:
                transient.append(record.offset)
            offset = record.offset + 1
    return metas, transient


def as_list(columns: object) -> list[MessageMeta]:
    return [columns[i] for i in range(len(columns))]  # type: ignore[index, arg-type]


def expanded(ranges: list[tuple[int, int]]) -> list[int]:
    return [offset for lo, hi in ranges for offset in range(lo, hi)]


# ------------------------------------------------------------------ the file


def sample_facts() -> SegmentFacts:
    return SegmentFacts(100, array("I", [1, 2, 3]), array("B", [0, 9, 255]),
                        array("q", [5, 6, 7]), array("q", [-1, 40, -1]), array("I", [2]))


def test_a_sidecar_decodes_to_the_facts_it_was_written_from() -> None:
    facts = sample_facts()
    assert decode_sidecar(encode_sidecar(facts, 4096), 100, 103, 4096) == facts


def test_a_sidecar_of_another_segment_or_size_is_not_used() -> None:
    data = encode_sidecar(sample_facts(), 4096)
    assert decode_sidecar(data, 101, 103, 4096) is None
    assert decode_sidecar(data, 100, 104, 4096) is None
    assert decode_sidecar(data, 100, 103, 4097) is None  # cut back and written again


def test_every_corrupt_byte_or_cut_is_noticed() -> None:
    data = encode_sidecar(sample_facts(), 4096)
    for position in range(len(data)):
        damaged = bytearray(data)
        damaged[position] ^= 0x40
        assert decode_sidecar(bytes(damaged), 100, 103, 4096) is None, position
    for length in range(len(data)):
        assert decode_sidecar(data[:length], 100, 103, 4096) is None, length


def test_timestamps_are_read_only_when_expiry_needs_them() -> None:
    fs = MemoryFileSystem()
    fs.makedirs("/m")
    without = SegmentFacts(0, array("I", [1, 2]), array("B", [0, 0]), array("q", [5, 6]))
    write_sidecar(fs, "/m/a", without, 10)
    read = read_sidecar(fs, "/m/a", 0, 2, 10, with_timestamps=False)
    assert read is not None and len(read.timestamps) == 0 and read.sizes == without.sizes
    assert read_sidecar(fs, "/m/a", 0, 2, 10) == without
    write_sidecar(fs, "/m/b", sample_facts(), 10)  # own expirations: timestamps needed
    assert read_sidecar(fs, "/m/b", 100, 103, 10, with_timestamps=False) == sample_facts()
    assert read_sidecar(fs, "/m/missing", 0, 2, 10) is None


def test_facts_scanned_from_a_log_match_every_message_decoded() -> None:
    fs = MemoryFileSystem()
    log = written_log(fs)
    for queue in (settings(), settings(ttl=500)):
        facts = scanned_facts(log, 7, log.next_offset)
        metas, transient = reference_metas(log, 7, queue)
        assert as_list(facts.meta_columns(queue.message_ttl_ms)) == metas
        assert expanded(facts.transient_ranges(7)) == transient


# ----------------------------------------------------------------- recovery


def test_recovery_with_without_and_with_corrupt_sidecars_agrees() -> None:
    for queue in (settings(), settings(ttl=300), settings(durable=False)):
        fs = MemoryFileSystem()
        log = written_log(fs)
        assert log.segment_count > 5
        expected = reference_metas(log, 13, queue)
        first = recovered_metas(fs, DIRECTORY, log, 13, queue)  # none yet: built
        sidecars = sidecar_directory(DIRECTORY)
        names = fs.listdir(sidecars)
        needed = [base for base, next_offset, *_ in log.segment_summaries()[:-1]
                  if next_offset > 13]  # sealed, past the ack floor (not the active one)
        assert [int(name.split(".")[0]) for name in names] == needed
        second = recovered_metas(fs, DIRECTORY, log, 13, queue)  # read back
        path = os.path.join(sidecars, names[2])
        handle = fs.open(path)
        data = handle.read_at(0, handle.size())
        handle.close()
        fs.remove(path)
        damaged = fs.open(path)
        damaged.append(data[:-1] + bytes([data[-1] ^ 1]))
        damaged.close()
        fs.remove(os.path.join(sidecars, names[4]))
        third = recovered_metas(fs, DIRECTORY, log, 13, queue)  # rebuilt
        for columns, transient in (first, second, third):
            assert as_list(columns) == expected[0]
            assert expanded(transient) == expected[1]
        assert fs.listdir(sidecars) == names
        base, next_offset, size, _ = next(
            summary for summary in log.segment_summaries() if summary[0] == needed[2])
        assert read_sidecar(fs, path, base, next_offset, size) is not None  # written again
        log.close()


def test_sidecars_of_deleted_segments_are_removed() -> None:
    fs = MemoryFileSystem()
    log = written_log(fs)
    recovered_metas(fs, DIRECTORY, log, 0, settings())
    log.delete_before(60)
    recovered_metas(fs, DIRECTORY, log, 60, settings())
    kept = {int(name.split(".")[0]) for name in fs.listdir(sidecar_directory(DIRECTORY))}
    assert kept == {base for base, *_ in log.segment_summaries()[:-1]}
    log.close()


State = tuple[tuple[int, int, int | None], list[tuple[int, bool]], list[object]]


def core_state(fs: MemoryFileSystem, queue: QueueSettings, now_ms: int) -> State:
    """Counts, bytes and the whole delivery sequence of a queue opened from `fs`."""
    opened = open_queue_files(queue, fs, DIRECTORY, None, now_ms, SMALL)
    core = opened.core
    counts = (core.message_count, core.ready_bytes, core.next_deadline_ms())
    core.add_consumer(Consumer("c", "ch", prefetch_count=0), now_ms)
    effects = core.pump(now_ms + 600)
    deliveries = [(e.offset, e.redelivered) for e in effects if isinstance(e, Deliver)]
    settled: list[object] = [e for e in effects if not isinstance(e, Deliver)]
    opened.log.close()
    opened.cursor.close()
    opened.mark.close()
    return counts, deliveries, settled


def test_opened_queue_is_the_same_with_and_without_sidecars() -> None:
    for queue in (settings(), settings(ttl=2_000), settings(max_priority=3),
                  settings(ttl=600, max_priority=4)):
        fs = MemoryFileSystem()
        written_log(fs).close()
        cursor = CursorLog.open(fs, os.path.join(DIRECTORY, "cursor"))
        cursor.append([(0, 9), (20, 25), (70, 71)])  # acked, some out of order
        cursor.sync()
        cursor.close()
        mark = fs.open(os.path.join(DIRECTORY, "delivery-mark"))
        mark.append(b'{"delivered_below": 30}')  # a crash: 9..30 may have been delivered
        mark.close()
        without = core_state(fs, queue, NOW + 500)  # no sidecars yet: every segment read
        with_sidecars = core_state(fs, queue, NOW + 500)
        sidecars = sidecar_directory(DIRECTORY)
        for name in fs.listdir(sidecars):
            fs.remove(os.path.join(sidecars, name))
        rebuilt = core_state(fs, queue, NOW + 500)
        assert without == with_sidecars == rebuilt
        (count, _, _), deliveries, settled = without
        assert count > 0 and deliveries
        if queue.message_ttl_ms is None or queue.message_ttl_ms > 1_000:
            assert any(redelivered for _, redelivered in deliveries)
        if queue.message_ttl_ms is not None:
            assert settled  # some expired


# --------------------------------------------------------------- the writer


async def test_the_shell_writes_sidecars_as_segments_seal_and_on_close() -> None:
    fs = MemoryFileSystem()
    shell = QueueShell.open(settings(), fs, DIRECTORY, log_config=SMALL)
    for index in range(60):
        shell.admit(message(index))
        await asyncio.wait_for(shell.append(message(index)), 5)
    for _ in range(50):
        await asyncio.sleep(0)
    sealed = shell.log.segment_summaries()[:-1]
    assert len(sealed) > 3
    written = fs.listdir(sidecar_directory(DIRECTORY))
    assert len(written) >= len(sealed) - 1  # the newest may still be in line
    await shell.close()
    for base, next_offset, size, _ in sealed:
        path = sidecar_path(sidecar_directory(DIRECTORY), base)
        assert read_sidecar(fs, path, base, next_offset, size) is not None


# ------------------------------------------------------- the core's columns


@settings_(max_examples=200, deadline=None)
@given(st.integers(0, 5), st.integers(0, 40), st.lists(st.tuples(st.integers(0, 50),
                                                                 st.integers(1, 6))),
       st.integers(0, 60), st.sampled_from([None, 2]))
def test_recover_from_columns_matches_message_by_message(
    ack_floor: int, count: int, acks: list[tuple[int, int]], delivered_below: int,
    max_priority: int | None,
) -> None:
    next_offset = ack_floor + count
    metas = [MessageMeta(offset % 7 + 1, 0, offset % 4) for offset in range(ack_floor,
                                                                             next_offset)]
    acked = [(lo, lo + length) for lo, length in acks]
    core = QueueCore.recover(QueueLimits(), ack_floor=ack_floor, next_offset=next_offset,
                             acked=acked, metas=MetaColumns.of(metas),
                             delivered_below=delivered_below, max_priority=max_priority)
    ready = [offset for offset in range(ack_floor, next_offset)
             if not any(lo <= offset < hi for lo, hi in acked)]
    if max_priority is not None:
        ready.sort(key=lambda o: (-min(metas[o - ack_floor].priority, max_priority), o))
    assert core.message_count == len(ready)
    assert core.ready_bytes == sum(metas[o - ack_floor].size_bytes for o in ready)
    core.add_consumer(Consumer("c", "ch"), 0)
    assert [(e.offset, e.redelivered) for e in core.pump(0) if isinstance(e, Deliver)] == [
        (offset, offset < delivered_below) for offset in ready]


def test_a_sidecar_names_its_segments_last_batch() -> None:
    facts = sample_facts()
    facts.last_batch_crc = 1234
    data = encode_sidecar(facts, 4096)
    assert decode_sidecar(data, 100, 103, 4096, last_batch_crc=1234) == facts
    assert decode_sidecar(data, 100, 103, 4096, last_batch_crc=1235) is None


def test_a_replica_cut_back_and_written_again_does_not_trust_old_sidecars() -> None:
    fs = MemoryFileSystem()
    log = written_log(fs)
    recovered_metas(fs, DIRECTORY, log, 0, settings(), replicated=True)
    before = {base: size for base, _, size, _ in log.segment_summaries()}
    log.truncate_to(102)  # a batch boundary inside the sealed segment [96, 108)

    def other(index: int) -> Message:  # same sizes, so the same segments: other priorities
        properties = message(index).properties
        if properties.priority is not None:
            properties.priority = (properties.priority + 1) % 5
        return Message("", "q", message(index).body, properties,
                       timestamp_ms=message(index).timestamp_ms)

    for first in range(102, 120, 6):
        log.append(records_of([other(i) for i in range(first, first + 6)]))
    log.sync()
    assert {base: size for base, _, size, _ in log.segment_summaries()} == before
    columns, _ = recovered_metas(fs, DIRECTORY, log, 0, settings(), replicated=True)
    assert as_list(columns) == reference_metas(log, 0, settings())[0]
    log.close()


# ------------------------------------------------------------ whole restarts


async def test_a_restart_after_a_clean_stop_or_a_crash_is_the_same_with_and_without_sidecars(
) -> None:
    for clean, queue in [(True, settings(ttl=60_000)), (False, settings(ttl=60_000)),
                         (True, settings(max_priority=4)), (False, settings(max_priority=4))]:
        fs = MemoryFileSystem()
        shell = QueueShell.open(queue, fs, DIRECTORY, log_config=SMALL)
        for index in range(120):
            shell.admit(message(index))
            await asyncio.wait_for(shell.append(message(index)), 5)
        taken = [found[0] for _ in range(30) if (found := shell.get("ch", no_ack=False))]
        assert len(taken) == 30
        shell.ack(taken[:10])  # the other 20 stay unacked across the stop
        await asyncio.wait_for(shell.settles_durable(), 5)
        for _ in range(20):
            await asyncio.sleep(0)  # the sidecar writer's turns
        if clean:
            await shell.close()
        else:
            fs.crash_losing_all_unsynced()  # kill -9: no close, no sidecars finished
        now = NOW + 1_000
        with_sidecars = core_state(fs, queue, now)
        sidecars = sidecar_directory(DIRECTORY)
        assert fs.listdir(sidecars)
        for name in fs.listdir(sidecars):
            fs.remove(os.path.join(sidecars, name))
        without = core_state(fs, queue, now)
        assert with_sidecars == without
        (count, _, _), deliveries, _ = with_sidecars
        transient = {index for index in range(120) if index % 7 == 3}  # gone on restart
        assert count == 120 - 10 - len(transient - set(taken[:10]))
        delivered_again = {offset for offset, _ in deliveries}
        unacked = set(taken[10:]) & delivered_again  # not transient, not expired since
        assert unacked and unacked - transient == unacked
        redelivered = {offset for offset, flag in deliveries if flag}
        assert unacked <= redelivered
        if clean and queue.max_priority is None:
            assert redelivered == unacked  # after a clean stop, a FIFO queue's are exact


def test_the_expiry_column_exists_only_once_something_expires() -> None:
    table = MessageMetaTable(10)
    table.extend(10, MetaRun([1, 2], [0, 0], [0, 0]))
    table.append(12, MessageMeta(3))
    assert table._expiries is None and table.expires_at_ms(11) == NO_EXPIRY
    table.append(13, MessageMeta(4, 99))
    table.extend_columns(14, MetaColumns(array("I", [5]), None, array("B", [1])))
    assert [table.expires_at_ms(o) for o in range(10, 15)] == [0, 0, 0, 99, 0]
    table.forget_below(14)
    assert table.size_bytes(14) == 5
    columns = MetaColumns.zeros(4)
    columns.put(0, MetaColumns(array("I", [1, 2]), None, array("B", [0, 0])))
    assert columns.expiries is None
    columns.put(2, MetaColumns(array("I", [3, 4]), array("q", [7, 0]), array("B", [0, 2])))
    assert as_list(columns) == [MessageMeta(1), MessageMeta(2), MessageMeta(3, 7),
                                MessageMeta(4, 0, 2)]


def test_a_followers_sidecars_wait_for_its_high_watermark() -> None:
    fs = MemoryFileSystem()
    log = written_log(fs)
    turns: list[Callable[[], None]] = []
    high_watermark = 40
    writer = SidecarWriter(fs, DIRECTORY, log, turns.append, chunk_bytes=256,
                           settled_below=lambda: high_watermark)

    def run() -> list[int]:
        writer.wrote()
        for _ in range(1_000):  # bounded: a turn per chunk
            if not turns:
                break
            turns.pop(0)()
        return [int(name.split(".")[0]) for name in fs.listdir(sidecar_directory(DIRECTORY))]

    sealed = log.segment_summaries()[:-1]
    assert run() == [base for base, next_offset, *_ in sealed if next_offset <= 40]
    high_watermark = 100
    assert run() == [base for base, next_offset, *_ in sealed if next_offset <= 100]
    for base, next_offset, size, _ in sealed:
        if next_offset <= 100:
            path = sidecar_path(sidecar_directory(DIRECTORY), base)
            assert read_sidecar(fs, path, base, next_offset, size) is not None
    writer.close()
    log.close()


async def test_sidecars_go_with_the_segments_retention_deletes() -> None:
    fs = MemoryFileSystem()
    shell = QueueShell.open(settings(), fs, DIRECTORY, log_config=SMALL)
    for index in range(60):
        shell.admit(message(index))
        await asyncio.wait_for(shell.append(message(index)), 5)
    for _ in range(50):
        await asyncio.sleep(0)
    assert len(fs.listdir(sidecar_directory(DIRECTORY))) > 2
    taken = [found[0] for _ in range(60) if (found := shell.get("ch", no_ack=False))]
    shell.ack(taken)
    await asyncio.wait_for(shell.settles_durable(), 5)
    for _ in range(100):  # bounded: the reclaim runs on a worker thread
        shell.reclaim_settled()
        await asyncio.sleep(0.01)
        await asyncio.wait_for(shell.settles_durable(), 5)
        live = {base for base, *_ in shell.log.segment_summaries()[:-1]}
        written = {int(name.split(".")[0]) for name in fs.listdir(sidecar_directory(DIRECTORY))}
        if shell.log.segment_count == 1 and not written:
            break
    assert written <= live and shell.log.segment_count == 1
    await shell.close()


def test_a_priority_set_filled_in_ascending_runs_delivers_as_one_filled_one_by_one() -> None:
    runs = [(3, [1, 1, 1]), (8, [0, 2, 1, 2]), (20, [2] * 5), (30, [])]
    ascending, one_by_one = PriorityReadySet(1), PriorityReadySet(1)
    for first, priorities in runs:
        ascending.add_ascending(first, array("B", priorities))
        for index, priority in enumerate(priorities):
            one_by_one.add_new(first + index, priority)
    assert len(ascending) == len(one_by_one) and ascending.next_offset == 25
    assert [ascending.pop() for _ in range(len(ascending))] == [
        one_by_one.pop() for _ in range(len(one_by_one))]
