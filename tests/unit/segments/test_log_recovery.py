from segments.log import Log
from segments.log_config import LogConfig, RecoveryReport
from segments.log_recovery import recover_segments, scan_directory
from segments.memory_filesystem import MemoryFileSystem
from segments.record_batch import Record


def test_an_empty_directory_gets_one_segment_at_the_initial_offset() -> None:
    fs = MemoryFileSystem()
    fs.makedirs("/log")
    segments, report = recover_segments(fs, "/log", 42, 4096)
    assert [(s.base_offset, s.next_offset) for s in segments] == [(42, 42)]
    assert report == RecoveryReport(0, 0, 0)
    assert scan_directory(fs, "/log") == [42]


def test_index_files_without_their_data_are_removed() -> None:
    fs = MemoryFileSystem()
    fs.makedirs("/log")
    fs.open("/log/00000000000000000007.index").close()
    fs.open("/log/00000000000000000007.timeindex").close()
    fs.open("/log/notes.txt").close()
    assert scan_directory(fs, "/log") == []
    assert fs.listdir("/log") == ["notes.txt"]


def test_only_segments_after_the_last_confirmed_one_are_scanned() -> None:
    fs = MemoryFileSystem()
    config = LogConfig(segment_bytes_max=2048)
    log = Log.open(fs, "/log", config)
    for index in range(8):
        log.append([Record(bytes(900), index)])
    log.sync()  # every rolled segment confirmed
    log.close()
    segments, report = recover_segments(fs, "/log", 0, config.index_interval_bytes)
    assert segments[-1].next_offset == 8 and len(segments) == report.segment_count > 2
    assert report.scanned_bytes == segments[-1].size  # only the active one
