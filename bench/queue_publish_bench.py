"""The queue's publish path, in process: `QueueShell.admit` + `append` per message, and
`admit_many` + `append_many` per batch, on a MemoryFileSystem with fsync `never`.

`python bench/queue_publish_bench.py` prints one JSON line: messages per second of
CPU time (the process's, so that other load on the machine counts less), the best
of `--rounds`, for one message per call and for `--batch` messages per call. It
measures what the queue itself adds to a publish (admission, metas, records, the
group commit's write, readiness, the confirm), not the disk nor the protocol. To
compare two trees, run it in each, alternating, in the same session.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from pamqp import commands

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script
from logbroker.message import Message
from logbroker.queue.fsync_policy import FsyncPolicy
from logbroker.queue.queue_limits import QueueLimits
from logbroker.queue.queue_shell import QueueSettings, QueueShell
from segments.memory_filesystem import MemoryFileSystem

CONFIRM_WINDOW = 200  # appends in flight before the publisher waits for their confirms


async def _publish(messages: int, batch: int, body_bytes: int) -> float:
    """Messages per CPU second for one run of `messages` in calls of `batch`."""
    settings = QueueSettings("/", "bench", True, QueueLimits(),
                             fsync_policy=FsyncPolicy.parse("never"))
    shell = QueueShell.open(settings, MemoryFileSystem(), "/bench")
    share = [Message("", "bench", b"x" * body_bytes,
                     commands.Basic.Properties(delivery_mode=2)) for _ in range(batch)]
    gc.collect()
    started = time.process_time()
    confirms: list[asyncio.Future[int]] = []
    for _ in range(messages // batch):
        if batch == 1:
            shell.admit(share[0])
            confirms.append(shell.append(share[0]))
        else:
            shell.admit_many(share)
            confirms.append(shell.append_many(share))
        if len(confirms) >= CONFIRM_WINDOW:
            await asyncio.gather(*confirms)
            confirms.clear()
    await asyncio.gather(*confirms)
    elapsed = time.process_time() - started
    await shell.close()
    return (messages // batch) * batch / max(elapsed, 1e-9)


async def _best(rounds: int, messages: int, batch: int, body_bytes: int) -> float:
    return max([await _publish(messages, batch, body_bytes) for _ in range(rounds)])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--body-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    single = asyncio.run(_best(args.rounds, args.messages, 1, args.body_bytes))
    batched = asyncio.run(_best(args.rounds, args.messages, args.batch, args.body_bytes))
    print(json.dumps({"single_msgs_per_cpu_s": round(single),
                      f"batch{args.batch}_msgs_per_cpu_s": round(batched)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
