"""`CommitPort`: how a queue shell appends to a log and learns when the append is durable.

Why a port: the shell's write path decides (what is ready, what is confirmed,
what is settled) and the committer moves bytes. Behind this port the shell
is synchronous, so the deterministic simulation runs the shipped shell
objects over a simulated committer, while the broker runs them over the
asyncio `GroupCommitter` (group_commit.py: threads and futures).

The contract: `append` queues `item` now, so the order of `append` calls is
the order of the log. `on_written` runs once the item is written (readable,
not yet synced), then exactly one of `on_durable` (durable under the
committer's fsync policy; at once after the write for a `durable=False`
item) or `on_failed` (the write or its sync failed). Items become durable in
the order they were appended, except that a `durable=False` one may pass
earlier durable ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

__all__ = ["CommitPort"]

ItemT_contra = TypeVar("ItemT_contra", contravariant=True)
ResultT_co = TypeVar("ResultT_co", covariant=True)


class CommitPort(Protocol[ItemT_contra, ResultT_co]):
    def append(self, item: ItemT_contra, durable: bool,
               on_written: Callable[[ResultT_co], None] | None,
               on_durable: Callable[[ResultT_co], None],
               on_failed: Callable[[BaseException], None]) -> None: ...
