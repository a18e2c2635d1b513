"""When a group committer's fsync runs on the event loop instead of its thread.

Why: handing an fsync to a thread and its completion back to the loop costs two
cross-CPU wake-ups. On this project's VM that is 60-110 µs per fsync (a bare
pipe ping-pong between two threads takes 60 µs; docs/benchmarks.md), a third
of a 64-appender group commit's cycle. The thread pays for itself when the
loop has other work to do during the fsync (later publishes written while it
runs, other queues, sockets). When everything the loop serves is waiting for
the fsync, it buys nothing, and running the fsync on the loop is faster.

Theory of operation: every fsync on the thread is a measurement. The loop sat
idle through it when nothing was written meanwhile and the loop's CPU time,
beyond the `handoff_cpu_s` it takes to receive the completion, was at most
`idle_share_max` of the fsync's wall time. After an idle fsync of
at least `group_items_min` items, the next `inline_run` fsyncs of groups that
large run on the loop; then one runs on the thread again, to measure again.
Small groups (a paced publisher waiting on every message) always go to the
thread, so the loop stays free to write and deliver what arrives meanwhile.

Only fast fsyncs run on the loop (`wall_max_s`): the hand-off matters next to
an fsync of a few hundred microseconds, not next to a slow disk's tens of
milliseconds, which must not stall the loop. A measured fsync slower than that
keeps the next ones on the thread, and so does an fsync on the loop that took
longer (`inline_took`).

Invariant: an fsync runs on the loop only while the last measurement found the
loop idle and the last fsync fast, and at most `inline_run` of them follow one
measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

GROUP_ITEMS_MIN = 16
INLINE_RUN = 16
IDLE_SHARE_MAX = 0.2
# The loop's own CPU time for taking the fsync's completion back (its callbacks
# before the committer resumes), which is not other work.
HANDOFF_CPU_S = 30e-6
# The longest fsync worth running on the loop: the hand-off it saves is 60-110 µs.
WALL_MAX_S = 0.001


@dataclass
class InlineSyncChooser:
    group_items_min: int = GROUP_ITEMS_MIN
    inline_run: int = INLINE_RUN
    idle_share_max: float = IDLE_SHARE_MAX
    handoff_cpu_s: float = HANDOFF_CPU_S
    wall_max_s: float = WALL_MAX_S
    _inline_left: int = 0

    def run_inline(self, group_items: int) -> bool:
        """Whether the fsync for a group of `group_items` runs on the loop."""
        if self._inline_left > 0 and group_items >= self.group_items_min:
            self._inline_left -= 1
            return True
        return False

    def measured(self, group_items: int, wall_s: float, loop_cpu_s: float,
                 written_meanwhile: bool) -> None:
        """An fsync on the thread took `wall_s`, and the loop used `loop_cpu_s` of CPU
        meanwhile; `written_meanwhile` if submissions were written during it."""
        other_work_s = loop_cpu_s - self.handoff_cpu_s
        idle = not written_meanwhile and other_work_s <= self.idle_share_max * wall_s
        large = group_items >= self.group_items_min
        fast = wall_s <= self.wall_max_s
        self._inline_left = self.inline_run if idle and large and fast else 0

    def inline_took(self, wall_s: float) -> None:
        """An fsync on the loop took `wall_s`: a slow one sends the next to the thread."""
        if wall_s > self.wall_max_s:
            self._inline_left = 0
