"""The shell reads time from its injected Clock and its settings as they are now."""

from __future__ import annotations

import dataclasses

from pamqp import commands

from logbroker.message import Message
from logbroker.queue.queue_limits import QueueLimits
from logbroker.queue.queue_shell import QueueSettings, QueueShell
from segments.clock import ManualClock
from segments.memory_filesystem import MemoryFileSystem

SETTINGS = QueueSettings(vhost="/", name="q", durable=True, limits=QueueLimits())


def message() -> Message:
    return Message("", "q", b"m", commands.Basic.Properties(delivery_mode=2))


async def publish(shell: QueueShell) -> int:
    published = message()
    shell.admit(published)
    return await shell.append(published)


async def test_a_policys_message_ttl_applies_to_later_publishes_on_the_injected_clock(
) -> None:
    clock = ManualClock()
    shell = QueueShell.open(SETTINGS, MemoryFileSystem(), "/q", clock=clock)
    before = await publish(shell)
    shell.settings = dataclasses.replace(SETTINGS, message_ttl_ms=1000)  # a policy came
    after = await publish(shell)
    assert shell.ttl_left_ms(before) is None and shell.ttl_left_ms(after) == 1000
    clock.advance(400)
    assert shell.ttl_left_ms(after) == 600
    clock.advance(601)  # expired: a get finds only the message without a TTL
    found = shell.get("ch", no_ack=True)
    assert found is not None and found[0] == before
    assert shell.get("ch", no_ack=True) is None
    await shell.close()
