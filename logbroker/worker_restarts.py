"""`WorkerRestarts`: when the supervisor of `serve --workers N` starts, restarts and
stops its workers (pure: time comes in as `now_ms`, effects go out).

Theory of operation. `begin` starts every worker. A worker that exits while
the node runs is started again after a backoff that doubles from `base_ms`
up to `max_ms` for each exit in a row, and falls back to `base_ms` once the
worker had run `stable_ms`: a worker that crashes at once is not restarted
in a tight loop, and one that ran for a day comes back at once. A worker
that exits with `USAGE` (its settings are wrong, so every restart would
fail the same way) stops the whole node.

`stop` (SIGTERM or SIGINT to the supervisor) starts nothing any more and
stops the running workers one at a time, from the highest index down to
worker 1: a stopping worker hands the queues it leads to another member,
and a sibling that was stopped at the same moment could be the one it
picks (then stops too, and hands them on again). One at a time, each
worker's handover finds its lower siblings running. The next worker gets
SIGTERM when the one before exited or after its step,
`stop_timeout_ms // count` (a slow one keeps stopping meanwhile); so every
worker has had SIGTERM by `stop_timeout_ms` minus one step, and the workers
still running at `stop_timeout_ms` get SIGKILL. The node exits once
stopping and no worker runs: 0 if every worker stopped by itself with 0,
else 1.

Invariants:
- a worker is started only while not running and not stopping, and only at
  or after its restart time;
- the backoff is at most `max_ms`;
- after `stop`, the only effects are signals and the final `Exit`, once;
- after `stop`, SIGTERM goes to each running worker once, in descending
  index order, and to a worker only when every higher one has exited or
  had its step;
- SIGKILL goes only to workers still running at the stop deadline.
"""

from __future__ import annotations

from dataclasses import dataclass, field

USAGE = 2  # `logbroker serve`'s exit code for bad settings


@dataclass(frozen=True, slots=True)
class Start:
    worker: int


@dataclass(frozen=True, slots=True)
class Signal:
    workers: tuple[int, ...]
    kill: bool  # SIGKILL, else SIGTERM


@dataclass(frozen=True, slots=True)
class Exit:
    code: int


Effect = Start | Signal | Exit


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    base_ms: int = 500
    max_ms: int = 30_000
    stable_ms: int = 60_000
    stop_timeout_ms: int = 30_000


@dataclass(slots=True)
class _Worker:
    running: bool = False
    started_ms: int = 0
    exits_in_a_row: int = 0
    restart_at_ms: int | None = None


@dataclass
class WorkerRestarts:
    count: int
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    restarts: int = 0
    _workers: dict[int, _Worker] = field(default_factory=dict)
    _stop_deadline_ms: int | None = None
    _to_stop: list[int] = field(default_factory=list)  # not signalled yet, next last
    _step_deadline_ms: int | None = None  # when the next in `_to_stop` gets SIGTERM
    _signalled: set[int] = field(default_factory=set)
    _killed: bool = False
    _unclean: bool = False
    _exited: bool = False

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"a node has at least one worker, not {self.count}")
        self._workers = {index: _Worker() for index in range(1, self.count + 1)}

    @property
    def stopping(self) -> bool:
        return self._stop_deadline_ms is not None

    def running(self) -> tuple[int, ...]:
        return tuple(index for index, worker in self._workers.items() if worker.running)

    def signalled(self, index: int) -> bool:
        """Whether the stop has sent `index` SIGTERM (the shell sends it again to a
        worker whose process was still being created then)."""
        return index in self._signalled

    def begin(self, now_ms: int) -> list[Effect]:
        return [self._start(index, now_ms) for index in self._workers]

    def exited(self, index: int, code: int, now_ms: int) -> list[Effect]:
        worker = self._workers[index]
        worker.running = False
        if self.stopping:
            self._unclean |= code != 0
            # Its lower sibling need not wait for the rest of its step.
            moved_on = self._stop_next(now_ms) if index == self._stopping_now() else []
            return moved_on + self._finish()
        if code == USAGE:
            self._unclean = True
            return self.stop(now_ms)
        ran_ms = now_ms - worker.started_ms
        worker.exits_in_a_row = 1 if ran_ms >= self.policy.stable_ms else \
            worker.exits_in_a_row + 1
        backoff = min(self.policy.base_ms << min(worker.exits_in_a_row - 1, 16),
                      self.policy.max_ms)
        worker.restart_at_ms = now_ms + backoff
        return []

    def stop(self, now_ms: int) -> list[Effect]:
        if self.stopping:
            return []
        self._stop_deadline_ms = now_ms + self.policy.stop_timeout_ms
        for worker in self._workers.values():
            worker.restart_at_ms = None
        self._to_stop = sorted(self.running())  # popped from the end: the highest first
        return self._stop_next(now_ms) + self._finish()

    def tick(self, now_ms: int) -> list[Effect]:
        if self._stop_deadline_ms is not None:
            running = self.running()
            if running and not self._killed and now_ms >= self._stop_deadline_ms:
                self._killed = self._unclean = True
                self._to_stop.clear()
                self._step_deadline_ms = None
                return [Signal(running, kill=True)]
            if self._step_deadline_ms is not None and now_ms >= self._step_deadline_ms:
                return self._stop_next(now_ms)
            return []
        due = [index for index, worker in self._workers.items()
               if worker.restart_at_ms is not None and worker.restart_at_ms <= now_ms]
        self.restarts += len(due)
        return [self._start(index, now_ms) for index in due]

    def next_deadline_ms(self) -> int | None:
        if self._stop_deadline_ms is not None:
            if self._killed or not self.running():
                return None
            return min(self._stop_deadline_ms, self._step_deadline_ms or self._stop_deadline_ms)
        times = [w.restart_at_ms for w in self._workers.values() if w.restart_at_ms is not None]
        return min(times, default=None)

    def _start(self, index: int, now_ms: int) -> Start:
        worker = self._workers[index]
        worker.running, worker.started_ms, worker.restart_at_ms = True, now_ms, None
        return Start(index)

    def _stop_next(self, now_ms: int) -> list[Effect]:
        """SIGTERM to the highest running worker not signalled yet, for one step."""
        self._step_deadline_ms = None
        while self._to_stop:
            index = self._to_stop.pop()
            if self._workers[index].running:
                self._signalled.add(index)
                if self._to_stop:
                    step_ms = max(self.policy.stop_timeout_ms // self.count, 1)
                    assert self._stop_deadline_ms is not None
                    self._step_deadline_ms = min(now_ms + step_ms, self._stop_deadline_ms)
                return [Signal((index,), kill=False)]
        return []

    def _stopping_now(self) -> int | None:
        """The worker whose step runs (the last signalled), while others wait their turn."""
        if self._step_deadline_ms is None or not self._signalled:
            return None
        return min(self._signalled)

    def _finish(self) -> list[Effect]:
        if self.running() or self._exited:
            return []
        self._exited = True
        return [Exit(1 if self._unclean else 0)]
