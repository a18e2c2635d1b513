"""Group commit: many concurrent appends, one write and one fsync per group.

Theory of operation. `submit(item)` queues the item and returns a future;
`append(item, ...)` queues it with callbacks instead (the queue shell's
`CommitPort`: no future per item, the outcome is handed over by the
committer itself).
A single flusher task takes everything queued (up to `group_items_max`),
hands it to the target's `append_group` as one write, and then, under the
`always` policy, runs an fsync on a worker thread. While that fsync runs, new
submissions are written as they come (so they are readable, and a queue can
deliver them, without waiting for it: see `sync_point.py`) and wait together
for the next fsync, so the number of fsyncs per second stays at what the disk
allows while messages per second grow with the number of concurrent
submitters. A target without sync points holds new submissions back until
the fsync is done. A sync point that is only an fdatasync of real files
(`SyncPoint.fds`) is run on a native thread that never takes the GIL
(`native_fsync.py`), so the fsync never makes the loop wait for the GIL;
other work (confirming a rolled segment, a directory sync) stays on the Python
thread. When the loop would only wait for the fsync (every
submitter waiting on it), the fsync runs on the loop instead, which saves the
hand-off to the thread and back (`inline_sync.py`). After an fsync the flusher
stays one loop iteration, so the submitters it released queue behind it and
are written as one group.

When a future resolves, its item is durable under the policy:
- `always`: written and fsynced (a publish confirm means "on disk");
- `interval`: written to the OS, and an fsync follows within `interval_ms`
  (an OS crash can lose at most that window; a process crash loses nothing);
- `never`: written to the OS, which flushes when it likes.

Invariants: at most one flush runs at a time (the target is single-owner);
items resolve in submission order; an item resolves only after an fsync that
began after it was written; a failed write or fsync fails exactly the items it
covered and nothing else; pending items are bounded by
`pending_items_max` (submitters wait for room).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, Literal, Protocol, TypeVar

from logbroker.queue.fsync_policy import FsyncMode, FsyncPolicy
from logbroker.queue.fsync_stats import FSYNC_STATS, FsyncStats
from logbroker.queue.inline_sync import InlineSyncChooser
from logbroker.queue.native_fsync import NativeFsync, available
from segments.errors import LogClosedError
from segments.sync_point import SyncPoint

logger = logging.getLogger(__name__)

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")
ItemT_contra = TypeVar("ItemT_contra", contravariant=True)
ResultT_co = TypeVar("ResultT_co", covariant=True)
ResultT_contra = TypeVar("ResultT_contra", contravariant=True)


class _Outcome(Protocol[ResultT_contra]):
    """Where an item's outcome goes: its future (`submit`), or the callbacks of
    `append` (`_Callbacks`)."""

    def done(self) -> bool: ...

    def set_result(self, result: ResultT_contra, /) -> None: ...

    def set_exception(self, error: BaseException, /) -> None: ...


# A submitted item: (item, its outcome, wait for fsync?, called once written).
_Pending = tuple[ItemT, "_Outcome[ResultT]", bool, "Callable[[ResultT], None] | None"]


class GroupAppendable(Protocol[ItemT_contra, ResultT_co]):
    """What the committer drives."""

    def append_group(self, items: Sequence[ItemT_contra]) -> Sequence[ResultT_co]: ...

    def sync(self) -> None: ...

    def wants_sync(self) -> bool:
        """True when a sync is due even under the `never` policy (a Log's rolled segment)."""
        ...

    def sync_point(self) -> SyncPoint | None:
        """A sync whose blocking part may overlap later appends; None if the target
        cannot append during a sync (then `sync` runs with appends held back)."""
        ...


class GroupCommitter(Generic[ItemT, ResultT]):
    """See the module docstring. A committer serves the event loop that first
    submits to it (its futures and tasks belong to that loop)."""

    def __init__(
        self,
        target: GroupAppendable[ItemT, ResultT],
        policy: FsyncPolicy,
        group_items_max: int = 4096,
        pending_items_max: int = 65536,
        fsync_stats: FsyncStats = FSYNC_STATS,
        after_write: Callable[[], None] | None = None,
        native_fsync: NativeFsync | Literal["auto"] | None = "auto",
    ) -> None:
        """`after_write` runs after each write's `on_written` callbacks (a queue
        delivers what they made ready at once, not an event-loop iteration later).
        `native_fsync` fdatasyncs sync points' files (`SyncPoint.fds`) off the GIL;
        "auto": the native thread when the extension is built; None: never."""
        self._target = target
        self.after_write = after_write
        self._fsync_stats = fsync_stats
        self.policy = policy
        self._group_items_max = group_items_max
        self._pending: list[_Pending[ItemT, ResultT]] = []
        self._unsynced: list[tuple[_Outcome[ResultT], ResultT]] = []  # written, not synced
        # True while an fsync with a sync point runs: submissions are written at once.
        self._writing_during_sync = False
        self._pending_items_max = pending_items_max
        self._in_flight = 0
        self._room_waiters: deque[asyncio.Future[None]] = deque()
        # One thread is enough: fsyncs of one target are serial anyway.
        self._fsync_thread = ThreadPoolExecutor(1, thread_name_prefix="fsync")
        if native_fsync == "auto":
            native_fsync = NativeFsync() if available() else None
        self._native = native_fsync
        self._flusher: asyncio.Task[None] | None = None
        self._exclusive = asyncio.Lock()
        self._interval_sync: asyncio.Handle | None = None
        self._closed = False
        self._background_sync: asyncio.Task[None] | None = None
        self._inline = InlineSyncChooser()
        # Looked up once: asyncio.get_running_loop() makes a getpid() system call on
        # every call (a fork check), and submit_nowait runs once per item.
        self._loop: asyncio.AbstractEventLoop | None = None
        self.groups_written = 0
        self.fsyncs = 0

    def submit(self, item: ItemT, durable: bool = True) -> Awaitable[ResultT]:
        """Append `item`; what it returns resolves once it is durable under the policy.

        `durable=False` (a transient message) resolves once written, without
        waiting for the group's fsync: nothing is promised across a crash.
        With room, the item is queued during the call and the future of
        `submit_nowait` is returned: no coroutine per item, which was a tenth of
        the loop's work per item with 64 appenders. Without room (`pending_items_max`
        items in flight) it waits for room first, queued when awaited.
        """
        if self._in_flight < self._pending_items_max:
            return self.submit_nowait(item, durable)
        return self._submit_when_room(item, durable)

    async def _submit_when_room(self, item: ItemT, durable: bool) -> ResultT:
        loop = asyncio.get_running_loop()
        while self._in_flight >= self._pending_items_max:
            waiter: asyncio.Future[None] = loop.create_future()
            self._room_waiters.append(waiter)
            await waiter
        return await self.submit_nowait(item, durable)

    def submit_nowait(
        self, item: ItemT, durable: bool = True,
        on_written: Callable[[ResultT], None] | None = None,
    ) -> asyncio.Future[ResultT]:
        """Queue `item` now, in call order; the future resolves as `submit` returns.

        For callers whose order must be the order of their calls (a channel's
        publishes to several queues); the limit on items in flight is the
        caller's to enforce. `on_written` runs as soon as the item is written,
        before the group's fsync (a queue makes the message deliverable then).
        """
        loop = self._loop
        if loop is None:  # a committer serves the loop that first submits to it
            loop = self._loop = asyncio.get_running_loop()
        future: asyncio.Future[ResultT] = loop.create_future()
        self._queue(item, future, durable, on_written)
        return future

    def append(self, item: ItemT, durable: bool,
               on_written: Callable[[ResultT], None] | None,
               on_durable: Callable[[ResultT], None],
               on_failed: Callable[[BaseException], None]) -> None:
        """The shell's `CommitPort` (commit_port.py): `submit_nowait` whose outcome goes
        to the callbacks, run by the committer itself (no future, nor a loop callback,
        per item)."""
        self._queue(item, _Callbacks(on_durable, on_failed), durable, on_written)

    def _queue(self, item: ItemT, outcome: _Outcome[ResultT], durable: bool,
               on_written: Callable[[ResultT], None] | None) -> None:
        if self._closed:
            raise LogClosedError("the group committer is closed")
        loop = self._loop
        if loop is None:  # a committer serves the loop that first submits to it
            loop = self._loop = asyncio.get_running_loop()
        self._in_flight += 1
        entry = (item, outcome, durable, on_written)
        if self._pending:  # behind what waits for the flusher, in order
            self._pending.append(entry)
            if self._flusher is None or self._flusher.done():  # it was cancelled
                self._flusher = loop.create_task(self._flush_pending())
            return
        idle = self._flusher is None or self._flusher.done()
        if idle and not self._exclusive.locked():
            # Nothing to keep order with and nothing to batch with yet: write now, so
            # the item is readable (deliverable) before this call returns; what else
            # arrives meanwhile is written by the flusher while this fsync runs.
            self._write_group([entry])
            if self._unsynced:
                self._flusher = loop.create_task(self._flush_pending())
            else:
                self._schedule_background_sync()
            return
        if self._writing_during_sync:
            # The running fsync lets writes go on: write now (readable, deliverable
            # before this call returns); the next fsync covers it.
            self._write_group([entry])
            return
        self._pending.append(entry)
        if idle:
            self._flusher = loop.create_task(self._flush_pending())

    def _release_room(self, count: int) -> None:
        """`count` items are done with (resolved, failed, or cancelled by their caller):
        counted here rather than in a done callback, which would cost a loop callback
        per item."""
        self._in_flight -= count
        for _ in range(min(count, len(self._room_waiters))):
            waiter = self._room_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    async def _flush_pending(self) -> None:
        async with self._exclusive:
            synced = True
            while synced:
                synced = False
                while self._pending or self._unsynced:
                    self._write_pending()
                    if self._unsynced:
                        await self._sync_unsynced()
                        synced = True
                if synced:
                    # The submitters this fsync released run in the next loop iteration
                    # and most submit again at once: stay for it, so they queue behind
                    # this flusher and are written together, rather than the first of
                    # them writing alone and starting another flusher.
                    await asyncio.sleep(0)
            self._schedule_background_sync()

    def _write_pending(self) -> None:
        while self._pending:
            group = self._pending[: self._group_items_max]
            del self._pending[: self._group_items_max]
            self._write_group(group)

    def _write_group(self, group: list[_Pending[ItemT, ResultT]]) -> None:
        items, futures, durables, callbacks = zip(*group, strict=True)
        try:
            results = self._target.append_group(items)
        except Exception as error:
            _fail(futures, error)
            self._release_room(len(group))
            return
        self.groups_written += 1
        if callbacks.count(None) != len(callbacks):
            for on_written, result in zip(callbacks, results, strict=True):
                if on_written is not None:
                    try:
                        on_written(result)
                    except Exception:  # one caller's bug must not fail the others' writes
                        logger.exception("on_written callback failed")
        if self.after_write is not None:
            try:
                self.after_write()
            except Exception:
                logger.exception("after_write callback failed")
        if self.policy.mode is FsyncMode.ALWAYS and False not in durables:
            self._unsynced.extend(zip(futures, results, strict=True))  # the usual case
            return
        wait_for_sync = self.policy.mode is FsyncMode.ALWAYS
        resolved = 0
        for future, durable, result in zip(futures, durables, results, strict=True):
            if durable and wait_for_sync:
                self._unsynced.append((future, result))
                continue
            resolved += 1
            if not future.done():
                future.set_result(result)  # a transient item needs no fsync
        if resolved:
            self._release_room(resolved)

    async def _sync_unsynced(self) -> None:
        """One fsync for every item written so far; items submitted while it runs are
        written at once when the target allows it, and wait for the next fsync.
        The fsync runs on the thread, or on the loop when the loop would only wait
        for it (see `inline_sync`)."""
        waiting, self._unsynced = self._unsynced, []
        try:
            # Inside the try: a target that cannot take a sync point (closed under
            # us) must fail these items, not leave their submitters waiting for ever.
            point = self._target.sync_point()
            work = self._target.sync if point is None else point.run
            if self._inline.run_inline(len(waiting)):
                started_s = time.perf_counter()
                self._timed(work)
                self._inline.inline_took(time.perf_counter() - started_s)
            else:
                await self._sync_on_thread(work, point, len(waiting))
            if point is not None:
                point.finish()
        except Exception as error:
            _fail([future for future, _ in waiting], error)
            self._release_room(len(waiting))
            return
        self.fsyncs += 1
        for future, result in waiting:
            if not future.done():
                future.set_result(result)
        self._release_room(len(waiting))

    async def _sync_on_thread(self, work: Callable[[], None], point: SyncPoint | None,
                              group_items: int) -> None:
        """Run `work` (or the fdatasync of `point.fds()` on the native thread) off the
        loop, and measure how idle the loop was meanwhile."""
        groups_before = self.groups_written
        fds = point.fds() if point is not None and self._native is not None else None
        synced: Awaitable[float | None]
        if fds:
            assert self._native is not None
            synced = self._native.fdatasync(fds)
        else:
            synced = (self._loop or asyncio.get_running_loop()).run_in_executor(
                self._fsync_thread, self._timed, work)
        started_s, loop_cpu_s = time.perf_counter(), time.thread_time()
        self._writing_during_sync = point is not None  # see submit_nowait
        try:
            took_s = await synced
        finally:
            self._writing_during_sync = False
        if took_s is not None:  # the native thread's fdatasync, timed there
            self._fsync_stats.record(took_s)
        self._inline.measured(group_items, time.perf_counter() - started_s,
                              time.thread_time() - loop_cpu_s,
                              self.groups_written != groups_before)

    def _schedule_background_sync(self) -> None:
        if self._interval_sync is not None:
            return
        loop = asyncio.get_running_loop()
        if self.policy.mode is FsyncMode.INTERVAL:
            self._interval_sync = loop.call_later(
                self.policy.interval_ms / 1000, self._start_interval_sync
            )
        elif self._target.wants_sync():
            # A rolled segment is confirmed by the next sync; without one a crash
            # would make recovery scan it. Kafka likewise flushes on roll, off the
            # write path.
            self._interval_sync = loop.call_soon(self._start_interval_sync)

    def _start_interval_sync(self) -> None:
        self._interval_sync = None
        # Held until done: the event loop keeps only weak references to tasks.
        self._background_sync = asyncio.get_running_loop().create_task(self.sync())
        self._background_sync.add_done_callback(_log_background_failure)

    async def sync(self) -> None:
        """fsync now, after every write queued before this call."""
        async with self._exclusive:
            await self._sync_off_loop()

    async def _sync_off_loop(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._fsync_thread, self._timed, self._target.sync)
        self.fsyncs += 1

    def _timed(self, sync: Callable[[], None]) -> None:
        """A sync on the fsync thread; a completed one records its duration."""
        started = time.perf_counter()
        sync()
        self._fsync_stats.record(time.perf_counter() - started)

    def exclusive(self) -> asyncio.Lock:
        """Hold this to run maintenance (truncate, retention) with no write or fsync running."""
        return self._exclusive

    async def close(self) -> None:
        """Finish everything submitted, fsync once more, and refuse new submissions."""
        self._closed = True
        if self._flusher is not None:
            await self._flusher
        if self._interval_sync is not None:
            self._interval_sync.cancel()
            self._interval_sync = None
        await self.sync()
        self._fsync_thread.shutdown(wait=False)
        if self._native is not None:
            self._native.close()


def _fail(futures: Sequence[_Outcome[ResultT]], error: Exception) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(error)


class _Callbacks(Generic[ResultT]):
    """`append`'s outcome: the callbacks, run once; a failing one is logged, so it cannot
    stop the committer from resolving the other items of its group."""

    __slots__ = ("_done", "_on_durable", "_on_failed")

    def __init__(self, on_durable: Callable[[ResultT], None],
                 on_failed: Callable[[BaseException], None]) -> None:
        self._on_durable = on_durable
        self._on_failed = on_failed
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, result: ResultT, /) -> None:
        self._done = True
        try:
            self._on_durable(result)
        except Exception:
            logger.exception("on_durable callback failed")

    def set_exception(self, error: BaseException, /) -> None:
        self._done = True
        try:
            self._on_failed(error)
        except Exception:
            logger.exception("on_failed callback failed")


def _log_background_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("interval fsync failed", exc_info=task.exception())
