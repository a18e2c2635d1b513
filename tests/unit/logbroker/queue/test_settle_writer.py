"""`SettleWriter` over synchronous ports: settles gathered into one cursor write, reported
once it lands, and settled segments reclaimed one reclaim at a time."""

from __future__ import annotations

from collections.abc import Callable

from logbroker.queue.retention import Retention
from logbroker.queue.settle_writer import SettleWriter
from segments.clock import ManualClock
from segments.cursor_log import CursorLog
from segments.log import Log, LogConfig
from segments.memory_filesystem import MemoryFileSystem
from segments.record_batch import Record
from tests.sim.leader_ports import SimCommitter, SimGather

RETAIN_NOTHING = Retention(retention_ms=None, retention_bytes=0)


class HeldReclaimer:
    """Reclaims only when told to finish (`finish`)."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.running: list[tuple[int, Callable[[], None]]] = []

    def reclaim(self, floor: int, done: Callable[[], None]) -> None:
        self.running.append((floor, done))

    def finish(self) -> None:
        for floor, done in self.running:
            self.log.delete_before(floor)
            done()
        self.running.clear()


class Writer:
    def __init__(self) -> None:
        fs = MemoryFileSystem()
        self.log = Log.open(fs, "/q/log", LogConfig(segment_bytes_max=200))
        for index in range(12):
            self.log.append([Record(f"message {index}".encode(), 0)])
        self.cursor = CursorLog.open(fs, "/q/cursor")
        self.commits: SimCommitter[list[tuple[int, int]], None] = SimCommitter(self.cursor)
        self.gather = SimGather()
        self.reclaimer = HeldReclaimer(self.log)
        self.settled: list[int] = []
        self.writer = SettleWriter(self.log, self.cursor, self.commits, self.gather,
                                   self.reclaimer, lambda: RETAIN_NOTHING, self.settled.append,
                                   ManualClock())


def test_settles_are_gathered_into_one_write_and_reported_once_it_lands() -> None:
    w = Writer()
    w.writer.settle(0, 2)
    w.writer.settle(2, 3)
    assert w.cursor.ack_floor == 0  # the window is open
    w.gather.close()
    assert w.cursor.ack_floor == 3 and w.settled == []  # written, not durable yet
    landed: list[BaseException | None] = []
    w.writer.when_written(landed.append)
    assert landed == []
    w.commits.complete()
    assert w.settled == [3] and landed == [None]
    w.writer.when_written(landed.append)  # nothing under way: at once
    assert landed == [None, None]


def test_settled_segments_are_reclaimed_one_reclaim_at_a_time() -> None:
    w = Writer()
    segments = len(w.log.segment_summaries())
    assert segments > 3
    w.writer.settle(0, 5)
    w.gather.close()
    w.commits.complete()
    assert len(w.reclaimer.running) == 1
    w.writer.settle(5, 12)
    w.gather.close()
    w.commits.complete()
    assert len(w.reclaimer.running) == 1  # the first one still runs
    w.reclaimer.finish()
    assert w.log.log_start_offset > 0
    w.writer.reclaim()
    w.reclaimer.finish()
    assert len(w.log.segment_summaries()) == 1  # the active segment stays


def test_a_closed_writer_writes_and_reports_nothing() -> None:
    w = Writer()
    w.writer.settle(0, 1)
    w.writer.close()
    w.gather.close()
    w.commits.complete()
    assert w.cursor.ack_floor == 0 and w.settled == []
