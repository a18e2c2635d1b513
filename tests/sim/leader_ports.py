"""The simulated `ShellIO` a queue leader's shipped `QueueShell` runs over on a simulated node.

The shell (logbroker/queue/queue_shell.py) reaches the disk and the clock only
through its `ShellIO` ports; in the broker that is `LoopShellIO` (the asyncio
`GroupCommitter`s, `SegmentReclaimer`, the loop's timers). Here, `SimShellIO`:

- `SimCommitter`: an append is written at once (readable, and deliverable
  when the pipeline makes it ready) and stays unsynced until the
  simulation's `complete` (a random later tick, as the old fsync thread's
  completion), so a crash in between loses it; a `durable=False` append is
  durable once written, as under the group committer;
- `SimReclaimer`: the settled segments are deleted at once;
- `SimGather`: the settle writer's gathering window closes at the leader's
  next flush;
- the shell's `call_soon` (its pump) runs when the simulated call into the
  shell returns, as asyncio runs it after the current callback;
- `HooksClock`: the simulation's tick as both monotonic and wall time.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from logbroker.queue.settle_writer import Ranges, SettleWriter
from segments.cursor_log import CursorLog
from segments.log import AppendResult, Log
from segments.record_batch import Record

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")
ItemT_contra = TypeVar("ItemT_contra", contravariant=True)
ResultT_co = TypeVar("ResultT_co", covariant=True)


class Appendable(Protocol[ItemT_contra, ResultT_co]):
    def append_group(self, items: Sequence[ItemT_contra]) -> Sequence[ResultT_co]: ...

    def sync(self) -> None: ...


class SimCommitter(Generic[ItemT, ResultT]):
    def __init__(self, target: Appendable[ItemT, ResultT],
                 after_write: Callable[[], None] | None = None) -> None:
        self._target = target
        self._after_write = after_write
        self._unsynced: list[tuple[ResultT, Callable[[ResultT], None],
                                   Callable[[BaseException], None]]] = []

    def append(self, item: ItemT, durable: bool,
               on_written: Callable[[ResultT], None] | None,
               on_durable: Callable[[ResultT], None],
               on_failed: Callable[[BaseException], None]) -> None:
        result = self._target.append_group([item])[0]
        if on_written is not None:
            on_written(result)
        if self._after_write is not None:
            self._after_write()
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


class Later(Protocol):
    def later(self, delay: int, action: Callable[[], None]) -> None: ...


@dataclass(eq=False)
class SimHandle:
    action: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True

    def run(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self.action()


class SimShellIO:
    """`ShellIO` on a simulated node. `call_soon` work runs when the leader's entry point
    that caused it returns (`run_ready`), as asyncio runs it after the current
    callback; `call_later` (the core's timer) counts ticks as milliseconds; the
    coroutines never suspend (`run_now` drives them)."""

    def __init__(self, log: Log, cursor: CursorLog, world: Later) -> None:
        self._world = world
        self._after_write: Callable[[], None] | None = None
        self._log_commits: SimCommitter[Sequence[Record], AppendResult] = SimCommitter(
            log, self._wrote)
        self._cursor_commits: SimCommitter[Ranges, None] = SimCommitter(cursor)
        self._reclaimer = SimReclaimer(log)
        self._gather = SimGather()
        self._ready: collections.deque[SimHandle] = collections.deque()
        self.stopped = False

    @property
    def log_commits(self) -> SimCommitter[Sequence[Record], AppendResult]:
        return self._log_commits

    @property
    def cursor_commits(self) -> SimCommitter[Ranges, None]:
        return self._cursor_commits

    @property
    def reclaimer(self) -> SimReclaimer:
        return self._reclaimer

    def after_write(self, action: Callable[[], None]) -> None:
        self._after_write = action

    def _wrote(self) -> None:
        if self._after_write is not None:
            self._after_write()

    def call_soon(self, action: Callable[[], None]) -> SimHandle:
        handle = SimHandle(action)
        self._ready.append(handle)
        return handle

    def call_later(self, delay_s: float, action: Callable[[], None]) -> SimHandle:
        handle = SimHandle(action)
        self._world.later(math.ceil(delay_s * 1000), self._guarded(handle))
        return handle

    def _guarded(self, handle: SimHandle) -> Callable[[], None]:
        def fire() -> None:
            if not self.stopped:
                handle.run()
                self.run_ready()
        return fire

    def gather(self, flush: Callable[[], None]) -> None:
        self._gather(flush)

    def run_ready(self) -> None:
        while self._ready and not self.stopped:
            self._ready.popleft().run()

    def flush(self) -> None:
        """The syncs land: the log's, then the gathered settles go to the cursor log,
        and its sync lands too."""
        self._log_commits.complete()
        self._gather.close()
        self._cursor_commits.complete()

    async def settles_durable(self, settler: SettleWriter) -> None:
        await self.drain(settler)

    async def drain(self, settler: SettleWriter) -> None:
        self._gather.close()
        self._cursor_commits.complete()

    async def close(self) -> None:
        self._log_commits.complete()  # the group committer's last sync

    def stop(self) -> None:
        """The node crashed: nothing more runs here."""
        self.stopped = True
        self._ready.clear()


def run_now(work: Coroutine[object, None, None]) -> None:
    """Run a coroutine that never suspends (the shell's, over `SimShellIO`) to its end."""
    try:
        work.send(None)
    except StopIteration:
        return
    work.close()
    raise AssertionError("a simulated shell coroutine suspended")
