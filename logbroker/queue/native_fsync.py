"""`NativeFsync`: a group committer's fdatasyncs on a thread that never takes the GIL.

Why. The committer's fsync thread was a Python thread (`ThreadPoolExecutor`):
it takes the GIL to pick up the job, again after `fdatasync` returns, and runs
Python code around it (the executor's work item, the fsync timing, the
future's hand-back through `call_soon_threadsafe`). The event loop's thread,
which holds the GIL while it runs, then waits for it whenever the two meet.
At a paced 2,000 msg/s on this project's 2-core VM that was one GIL wait of
the loop per fsync (9,849 futex waits in 5 s, 737 ms in all, the longest
9.3 ms: the holder had been preempted), and every such wait delays the
publishes and deliveries that arrive meanwhile.

How. `_fsync_thread.FsyncThread` (C, `_fsync_thread.c`) fdatasyncs the
descriptors of one job in order and writes a byte to a pipe; this shell
watches the pipe with the loop's `add_reader` and resolves the job there.
Only the descriptors cross over; everything else (what the fsync covers, what
it confirms) stays with the sync point on the loop. Without the compiled
extension, or with `LOGBROKER_PYTHON_FSYNC=1` in the environment (to compare),
`available()` is False and the committer keeps its Python thread.

Invariants: one job at a time (a committer syncs one group at a time); a
job that a cancelled caller left running is waited for, never overlapped;
`close` joins the thread after its running job.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from typing import Protocol

__all__ = ["FsyncThreadPort", "NativeFsync", "available"]


class FsyncThreadPort(Protocol):
    """What `_fsync_thread.FsyncThread` offers (a test may hand in its own)."""

    def submit(self, fds: Sequence[int], /) -> None: ...

    def take(self) -> tuple[int, int] | None: ...

    def fileno(self) -> int: ...

    def close(self) -> None: ...


def _load() -> Callable[[], FsyncThreadPort] | None:
    if os.environ.get("LOGBROKER_PURE_PYTHON") or os.environ.get("LOGBROKER_PYTHON_FSYNC"):
        return None
    try:
        from logbroker.queue._fsync_thread import FsyncThread
    except ImportError:  # built without a C compiler: the Python thread does the work
        return None
    return FsyncThread


_NATIVE = _load()


def available() -> bool:
    return _NATIVE is not None


class NativeFsync:
    """fdatasync of a few descriptors off the loop, awaited on the loop."""

    def __init__(self, thread: Callable[[], FsyncThreadPort] | None = None) -> None:
        """`thread` makes the thread (default: the native one; see `available`)."""
        self._make_thread = thread or _NATIVE
        self._thread: FsyncThreadPort | None = None  # started by the first job
        self._loop: asyncio.AbstractEventLoop | None = None
        self._job: asyncio.Future[float] | None = None
        self._busy = False  # a job runs (its caller may have been cancelled)
        self._idle: asyncio.Future[None] | None = None

    async def fdatasync(self, fds: Sequence[int]) -> float:
        """fdatasync `fds` in order; the seconds it took. OSError if one failed (the
        ones after it are not synced)."""
        thread = self._started()
        loop = self._loop
        assert loop is not None
        while self._busy:  # a cancelled caller's job: wait for its end, do not overlap
            self._idle = loop.create_future()
            await self._idle
        job: asyncio.Future[float] = loop.create_future()
        thread.submit(fds)
        self._job, self._busy = job, True
        return await job

    def _started(self) -> FsyncThreadPort:
        if self._thread is None:
            if self._make_thread is None:
                raise RuntimeError("the native fsync thread is not built")
            self._loop = asyncio.get_running_loop()
            thread = self._make_thread()
            self._loop.add_reader(thread.fileno(), self._completed)
            self._thread = thread
        return self._thread

    def _completed(self) -> None:
        if self._thread is None:
            return
        outcome = self._thread.take()
        if outcome is None:  # a wake-up whose job was taken already
            return
        error, took_ns = outcome
        job, self._job, self._busy = self._job, None, False
        if self._idle is not None and not self._idle.done():
            self._idle.set_result(None)
        if job is None or job.done():  # its caller was cancelled
            return
        if error:
            job.set_exception(OSError(error, os.strerror(error)))
        else:
            job.set_result(took_ns / 1e9)

    def close(self) -> None:
        """Stop the thread (after the job it runs, if any)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(thread.fileno())
        thread.close()
