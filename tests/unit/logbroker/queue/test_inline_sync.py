"""InlineSyncChooser, and a group committer that runs some fsyncs on the loop."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

from logbroker.queue.fsync_policy import FsyncPolicy
from logbroker.queue.group_commit import GroupCommitter
from logbroker.queue.inline_sync import InlineSyncChooser


def test_fsyncs_go_to_the_thread_until_one_found_the_loop_idle() -> None:
    chooser = InlineSyncChooser(group_items_min=16, inline_run=3, idle_share_max=0.2)
    assert not chooser.run_inline(64)
    chooser.measured(64, wall_s=0.001, loop_cpu_s=0.0001, written_meanwhile=False)
    assert [chooser.run_inline(64) for _ in range(4)] == [True, True, True, False]


def test_a_busy_loop_a_write_meanwhile_or_a_small_group_keeps_the_thread() -> None:
    chooser = InlineSyncChooser(group_items_min=16, inline_run=3, idle_share_max=0.2)
    chooser.measured(64, wall_s=0.001, loop_cpu_s=0.0005, written_meanwhile=False)
    assert not chooser.run_inline(64)  # the loop worked half the time
    chooser.measured(64, wall_s=0.001, loop_cpu_s=0.0, written_meanwhile=True)
    assert not chooser.run_inline(64)  # publishes were written during the fsync
    chooser.measured(8, wall_s=0.001, loop_cpu_s=0.0, written_meanwhile=False)
    assert not chooser.run_inline(64)  # measured on a small group: no evidence
    chooser.measured(64, wall_s=0.001, loop_cpu_s=0.0, written_meanwhile=False)
    assert not chooser.run_inline(8)  # a small group always goes to the thread
    assert chooser.run_inline(16)


def test_slow_fsyncs_stay_on_the_thread() -> None:
    chooser = InlineSyncChooser(group_items_min=16, inline_run=5, wall_max_s=0.001)
    chooser.measured(64, wall_s=0.02, loop_cpu_s=0.0, written_meanwhile=False)
    assert not chooser.run_inline(64)  # a 20 ms fsync must not stall the loop
    chooser.measured(64, wall_s=0.0005, loop_cpu_s=0.0, written_meanwhile=False)
    assert chooser.run_inline(64)
    chooser.inline_took(0.0008)
    assert chooser.run_inline(64)
    chooser.inline_took(0.005)  # the disk slowed down: back to the thread
    assert not chooser.run_inline(64)


def test_a_busy_measurement_ends_an_inline_run() -> None:
    chooser = InlineSyncChooser(group_items_min=16, inline_run=5)
    chooser.measured(64, wall_s=0.001, loop_cpu_s=0.0, written_meanwhile=False)
    assert chooser.run_inline(64)
    chooser.measured(64, wall_s=0.001, loop_cpu_s=0.001, written_meanwhile=False)
    assert not chooser.run_inline(64)


class ThreadNotingTarget:
    """Notes on which thread each fsync ran; an fsync takes 0.2 ms, as a fast disk's."""

    def __init__(self) -> None:
        self.sync_threads: list[int] = []

    def append_group(self, items: Sequence[int]) -> list[int]:
        return list(items)

    def sync(self) -> None:
        time.sleep(0.0002)
        self.sync_threads.append(threading.get_ident())

    def wants_sync(self) -> bool:
        return False

    def sync_point(self) -> None:
        return None


async def test_waiting_appenders_get_fsyncs_on_the_loop_a_paced_one_does_not() -> None:
    loop_thread = threading.get_ident()
    target = ThreadNotingTarget()
    committer: GroupCommitter[int, int] = GroupCommitter(target, FsyncPolicy.parse("always"))

    async def appender(first: int) -> None:
        for item in range(first, first + 40):
            assert await committer.submit(item) == item

    await asyncio.gather(*(appender(1000 * k) for k in range(64)))
    on_loop = sum(thread == loop_thread for thread in target.sync_threads)
    assert on_loop >= len(target.sync_threads) // 2  # all 64 wait on each fsync
    assert on_loop < len(target.sync_threads)  # one on the thread measures again

    target.sync_threads.clear()
    for item in range(20):  # one publisher waiting on every message: small groups
        await committer.submit(item)
    assert loop_thread not in target.sync_threads and len(target.sync_threads) == 20
    await committer.close()
