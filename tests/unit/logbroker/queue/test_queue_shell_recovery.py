"""Power loss between an ack reaching the disk and the record it acks."""

import asyncio
import time

from pamqp import commands

from logbroker.message import Message
from logbroker.queue.queue_limits import QueueLimits
from logbroker.queue.queue_shell import QueueSettings, QueueShell
from segments.memory_filesystem import MemoryFileSystem

SETTINGS = QueueSettings(vhost="/", name="q", durable=True, limits=QueueLimits())


async def test_acks_past_the_recovered_log_end_do_not_swallow_new_messages() -> None:
    fs = MemoryFileSystem()
    shell = QueueShell.open(SETTINGS, fs, "/data/q")
    # A transient message is confirmed once written, so it can be delivered and acked
    # while the log still has not fsynced it.
    transient = Message("", "q", b"transient", commands.Basic.Properties(delivery_mode=1))
    shell.admit(transient)
    await asyncio.wait_for(shell.append(transient), 5)
    found = shell.get("ch", no_ack=True)
    assert found is not None and found[2].body == b"transient"
    for _ in range(40):  # the settle reaches the cursor log, synced on an interval
        await asyncio.sleep(0.01)
    shell.cursor.sync()
    assert 0 in shell.cursor.acked
    fs.crash_losing_all_unsynced()  # power loss: the log never got its fsync

    shell = QueueShell.open(SETTINGS, fs, "/data/q")
    assert shell.log.next_offset == 0
    persistent = Message("", "q", b"confirmed", commands.Basic.Properties(delivery_mode=2))
    shell.admit(persistent)
    # The same offset the lost record had; it must not count as acked.
    assert await asyncio.wait_for(shell.append(persistent), 5) == 0
    found = shell.get("ch", no_ack=True)
    assert found is not None and found[2].body == b"confirmed"
    await shell.close()


class SlowSyncFileSystem(MemoryFileSystem):
    """fsync takes 300 ms (it runs on the committer's thread)."""

    def open(self, path: str):  # type: ignore[no-untyped-def]
        handle = super().open(path)
        original = handle.sync

        def slow_sync() -> None:
            time.sleep(0.3)
            original()

        handle.sync = slow_sync  # type: ignore[method-assign]
        return handle


async def test_written_messages_are_deliverable_before_their_confirm() -> None:
    shell = QueueShell.open(SETTINGS, SlowSyncFileSystem(), "/data/q")
    message = Message("", "q", b"early", commands.Basic.Properties(delivery_mode=2))
    shell.admit(message)
    confirm = shell.append(message)
    found = None
    for _ in range(200):  # written soon; its 300 ms fsync starts only after the write
        await asyncio.sleep(0.01)
        if (found := shell.get("ch", no_ack=False)) is not None:
            break
    assert found is not None and found[2].body == b"early"
    assert not confirm.done()  # the publisher hears only once it is durable
    assert await asyncio.wait_for(confirm, 5) == 0
    await shell.close()
