from pathlib import Path

from logbroker.resource_alarms import ResourceAlarms, ResourceMonitor, Watermarks, rss_bytes


def test_alarms_rise_and_clear_with_the_samples() -> None:
    alarms = ResourceAlarms(Watermarks(memory_high_bytes=1000, disk_free_limit_bytes=500))
    assert not alarms.update(rss_bytes=900, disk_free_bytes=600)
    assert alarms.update(rss_bytes=1001, disk_free_bytes=600)
    assert alarms.active == {"memory"} and alarms.reason == "low on memory"
    assert alarms.update(rss_bytes=1001, disk_free_bytes=499)
    assert alarms.reason == "low on disk & low on memory"
    assert not alarms.update(rss_bytes=1001, disk_free_bytes=499)
    assert alarms.update(rss_bytes=10, disk_free_bytes=10_000)
    assert alarms.active == frozenset()


def test_monitor_tells_listeners_only_about_changes(tmp_path: Path) -> None:
    seen: list[frozenset[str]] = []
    # A watermark below any real RSS, and an impossible disk limit: both alarms.
    monitor = ResourceMonitor(
        ResourceAlarms(Watermarks(memory_high_bytes=1, disk_free_limit_bytes=2**62)),
        str(tmp_path))
    monitor.subscribe(seen.append)
    monitor.sample()
    monitor.sample()
    assert seen == [frozenset({"memory", "disk"})]
    assert rss_bytes() > 0
