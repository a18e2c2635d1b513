"""The supervisor of `logbroker serve --workers N`: N worker processes of one node.

A thin asyncio shell around the pure `WorkerRestarts` (logbroker/worker_restarts.py),
which decides when a worker starts, restarts and is killed. Each worker is
`python -m logbroker` with the node's own command line, followed by the flags
of its `WorkerSpec` (logbroker/worker_layout.py: name, data dir, cluster port,
peers or seeds, `--workers 1`, `--reuse-port`), so it is an ordinary cluster
member that shares the node's AMQP and HTTP ports with its siblings through
SO_REUSEPORT. The supervisor holds no socket and no data: on SIGTERM or
SIGINT it stops the workers one at a time (the core's order), and it exits
when they all have. Each worker runs in a session of its own, so a signal
sent to the terminal's process group (Ctrl-C) or a service manager's
(systemd with `KillMode=mixed`) reaches the supervisor only, not every
worker at once. (Under Linux's autogroup scheduling a session is also a
scheduling group: each worker gets its own CPU share instead of the node's
workers splitting one, which in `bench/workers_bench.py` on 2 shared cores
cut the 2-worker CPU per message from 1.6x to 1.3x of one worker's.)
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
from collections.abc import Sequence

from logbroker.node_settings import ServeSettings
from logbroker.worker_layout import WorkerSpec
from logbroker.worker_restarts import Effect, Exit, Signal, Start, WorkerRestarts
from segments.clock import SYSTEM_CLOCK, Clock

logger = logging.getLogger("logbroker")
SUPERVISOR_VARIABLE = "LOGBROKER_SUPERVISOR_PID"
PR_SET_PDEATHSIG = 1  # linux/prctl.h


class WorkerSupervisor:
    def __init__(self, argv: Sequence[str], specs: Sequence[WorkerSpec],
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self._argv = list(argv)
        self._specs = {spec.index: spec for spec in specs}
        self._clock = clock
        self.core = WorkerRestarts(len(specs))
        self._processes: dict[int, asyncio.subprocess.Process] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._done: asyncio.Future[int] | None = None

    def command(self, spec: WorkerSpec) -> list[str]:
        return [sys.executable, "-m", "logbroker", *self._argv, *spec.flags()]

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stop)
        self._carry_out(self.core.begin(self._clock.monotonic_ms()))
        try:
            return await self._done
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
            if self._timer is not None:
                self._timer.cancel()

    def stop(self) -> None:
        logger.info("stopping the node's workers one at a time (SIGTERM to each)")
        self._carry_out(self.core.stop(self._clock.monotonic_ms()))

    def _carry_out(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Start):
                self._spawn(effect.worker)
            elif isinstance(effect, Signal):
                self._signal(effect)
            elif isinstance(effect, Exit) and self._done is not None \
                    and not self._done.done():
                self._done.set_result(effect.code)
        self._arm_timer()

    def _arm_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.core.next_deadline_ms()
        if deadline is not None:
            delay_s = max(deadline - self._clock.monotonic_ms(), 0) / 1000
            self._timer = asyncio.get_running_loop().call_later(delay_s, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self._carry_out(self.core.tick(self._clock.monotonic_ms()))

    def _spawn(self, index: int) -> None:
        task = asyncio.ensure_future(self._run_worker(index))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_worker(self, index: int) -> None:
        spec = self._specs[index]
        try:
            process = await asyncio.create_subprocess_exec(
                *self.command(spec), env={**os.environ, SUPERVISOR_VARIABLE: str(os.getpid())},
                start_new_session=True)
        except OSError as error:
            logger.error("worker %s did not start: %s", spec.node_name, error)
            code = 1
        else:
            self._processes[index] = process
            if self.core.signalled(index):  # its SIGTERM came while it was being started
                process.send_signal(signal.SIGTERM)
            logger.info("worker %s started (pid %d, cluster port %d, data in %s)",
                        spec.node_name, process.pid, spec.cluster_port, spec.data_dir)
            code = await process.wait()
            self._processes.pop(index, None)
        if not self.core.stopping:
            logger.warning("worker %s exited with %d; restarting it", spec.node_name, code)
        self._carry_out(self.core.exited(index, code, self._clock.monotonic_ms()))

    def _signal(self, effect: Signal) -> None:
        signum = signal.SIGKILL if effect.kill else signal.SIGTERM
        for index in effect.workers:
            process = self._processes.get(index)
            if process is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signum)


def stop_with_the_supervisor() -> None:
    """In a worker: SIGTERM when the supervisor dies (even by SIGKILL), so no worker
    outlives its node; exit at once if it is gone already. Linux only (prctl)."""
    supervisor = os.environ.pop(SUPERVISOR_VARIABLE, "")
    if not supervisor.isdigit():
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != int(supervisor):
        raise SystemExit(f"logbroker: the supervisor {supervisor} is gone")


async def supervise(argv: Sequence[str], settings: ServeSettings,
                    specs: Sequence[WorkerSpec]) -> int:
    logger.info("logbroker %s: %d workers on host %s (AMQP %d, HTTP %d shared)",
                settings.node_name, len(specs), settings.host_id, settings.amqp_port,
                settings.http_port)
    return await WorkerSupervisor(argv, specs).run()
