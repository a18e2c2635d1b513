"""The simulated ports a queue leader's shipped shell objects run over on a simulated node.

The `AppendPipeline` and the `SettleWriter` (logbroker/queue) reach the disk
through a `CommitPort` and delete segments through a `Reclaimer`; in the
broker those are the asyncio `GroupCommitter` and `SegmentReclaimer`. Here:

- `SimCommitter`: an append is written at once (readable, and deliverable
  when the pipeline makes it ready) and stays unsynced until the
  simulation's `complete` (a random later tick, as the old fsync thread's
  completion), so a crash in between loses it; a `durable=False` append is
  durable once written, as under the group committer;
- `SimReclaimer`: the settled segments are deleted at once;
- `SimGather`: the settle writer's gathering window closes at the leader's
  next flush;
- `HooksClock`: the simulation's tick as both monotonic and wall time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

from segments.log import Log

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")
ItemT_contra = TypeVar("ItemT_contra", contravariant=True)
ResultT_co = TypeVar("ResultT_co", covariant=True)


class Appendable(Protocol[ItemT_contra, ResultT_co]):
    def append_group(self, items: Sequence[ItemT_contra]) -> Sequence[ResultT_co]: ...

    def sync(self) -> None: ...


class SimCommitter(Generic[ItemT, ResultT]):
    def __init__(self, target: Appendable[ItemT, ResultT]) -> None:
        self._target = target
        self._unsynced: list[tuple[ResultT, Callable[[ResultT], None],
                                   Callable[[BaseException], None]]] = []

    def append(self, item: ItemT, durable: bool,
               on_written: Callable[[ResultT], None] | None,
               on_durable: Callable[[ResultT], None],
               on_failed: Callable[[BaseException], None]) -> None:
        result = self._target.append_group([item])[0]
        if on_written is not None:
            on_written(result)
        if durable:
            self._unsynced.append((result, on_durable, on_failed))
        else:
            on_durable(result)

    def complete(self) -> None:
        """The sync lands: everything written so far is durable, in order."""
        if not self._unsynced:
            return
        self._target.sync()
        done, self._unsynced = self._unsynced, []
        for result, on_durable, _ in done:
            on_durable(result)

    def fail_all(self, error: BaseException) -> None:
        """The writes still unsynced will never be durable here (the shell closes)."""
        failed, self._unsynced = self._unsynced, []
        for _, _, on_failed in failed:
            on_failed(error)


class SimReclaimer:
    def __init__(self, log: Log) -> None:
        self._log = log

    def reclaim(self, floor: int, done: Callable[[], None]) -> None:
        self._log.delete_before(floor)
        done()


class SimGather:
    def __init__(self) -> None:
        self._due: list[Callable[[], None]] = []

    def __call__(self, flush: Callable[[], None]) -> None:
        self._due.append(flush)

    def close(self) -> None:
        """The window closes: the gathered settles go to the cursor now."""
        due, self._due = self._due, []
        for flush in due:
            flush()


class Now(Protocol):
    @property
    def now_ms(self) -> int: ...


class HooksClock:
    def __init__(self, hooks: Now) -> None:
        self._hooks = hooks

    def monotonic_ms(self) -> int:
        return self._hooks.now_ms

    def wall_ms(self) -> int:
        return self._hooks.now_ms
